"""JUnit XML: one testcase per check, so CI systems show acceptance like a test run."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from gpuaccept.naming import floor_verdict_text
from gpuaccept.output_files import write_text_atomically
from gpuaccept.results import RunReport, Status


def render_junit(report: RunReport) -> str:
    suite = ET.Element(
        "testsuite",
        name=f"gpuaccept.{report.command}.{report.level}",
        tests=str(len(report.checks)),
        failures=str(sum(c.status is Status.FAIL for c in report.checks)),
        errors=str(sum(c.status is Status.ERROR for c in report.checks)),
        skipped=str(sum(c.status is Status.SKIP for c in report.checks)),
        time=f"{report.duration_seconds:.3f}",
        timestamp=report.started_at,
    )
    plan = report.action_plan
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="gpuaccept.action", value=plan.action.value)
    ET.SubElement(properties, "property", name="gpuaccept.action_rules", value=plan.rules)
    for check in report.checks:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"gpuaccept.{check.area.lower()}",
            name=check.name,
            time=f"{check.duration_seconds:.3f}",
        )
        # the check's recommended action leads the message a CI system shows
        said = f"[{plan.for_check(check.name).value}] {check.message}"
        if check.status is Status.FAIL:
            ET.SubElement(case, "failure", message=said).text = said
        elif check.status is Status.ERROR:
            ET.SubElement(case, "error", message=said).text = said
        elif check.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=check.message)
        lines = [
            f"{m.name} = {m.value:.6g} {m.unit} ({floor_verdict_text(m)})"
            for m in check.measurements
        ]
        if lines:
            ET.SubElement(case, "system-out").text = "\n".join(lines)
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(report: RunReport, path: Path) -> None:
    write_text_atomically(path, render_junit(report))

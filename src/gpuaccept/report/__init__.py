"""Writers of a RunReport (console, JSON, JUnit); none computes anything."""

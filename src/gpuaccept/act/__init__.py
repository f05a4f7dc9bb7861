"""From a verdict to a scheduler action, with guards (issue #31): drain a failing node, return a
repaired one, and never take a healthy cluster down."""

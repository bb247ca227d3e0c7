"""Prints the differential report at the end of the pytest run (when the suite ran)."""


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    report = getattr(config, "_kactor_differential_report", None)
    if report:
        terminalreporter.section("differential: kactor vs Apache Kafka 4.4.0")
        terminalreporter.write_line(report)

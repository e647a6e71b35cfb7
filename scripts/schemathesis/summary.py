"""Prints the figures docs/testing.md records from a schemathesis NDJSON report: operations,
test cases, check results and failed checks. Usage: summary.py events.ndjson"""

import json
import sys

operations, cases, checks, failed = set(), set(), 0, 0
with open(sys.argv[1]) as events:
    for line in events:
        event = json.loads(line)
        finished = event.get("ScenarioFinished") if isinstance(event, dict) else None
        if not finished:
            continue
        recorder = finished.get("recorder", {})
        label = recorder.get("label") or ""
        if " /" in label:  # "POST /v1/devices"; stateful scenarios carry another label
            operations.add(label)
        cases.update(recorder.get("cases", {}))
        for results in recorder.get("checks", {}).values():
            checks += len(results)
            failed += sum(1 for result in results if result.get("status") == "failure")
print(f"fuzz-api: {len(operations)} operations, {len(cases)} test cases, {checks} check results, {failed} failed")

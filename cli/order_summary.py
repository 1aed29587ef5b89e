"""The lines `lineage ingest order FRAMEWORK` prints without --json, for every framework."""

from __future__ import annotations

from typing import Any

from lineage.stream.schedule import BatchSchedule, RankRule


def order_summary(result: dict[str, Any], checked: str) -> list[str]:
    """What was stored, how it was checked (`checked`, the framework's own line), and the
    evidence: the spec and the occurrences' digest."""
    schedule = BatchSchedule.from_json(result["schedule"]).to_text()
    rule = RankRule.from_json(result["rank_rule"]).to_text()
    return [
        f"stream {result['name']}: {result['status']}: {result['windows']:,} windows in "
        f"{result['steps']:,} steps (schedule {schedule}, rank rule {rule}), "
        f"{result['segments']:,} segments in {result['occurrences']:,} occurrences",
        checked,
        f"spec {result['spec']} {result['spec_hash']}",
        f"occurrences {result['occurrences_digest']}",
    ]

"""The drift report: what a release changed for a target, as text (printed short, written in full)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..targets import Target
from .methods import CHANGED, GONE, SAME, MethodDrift
from .stacks import APPLIES, FAILS, StackCheck
from .stock_audit import StockAudit
from .surface import CallSite, LayerClass


@dataclass
class DriftReport:
    version: str
    target: Target
    reference: str  # the target's own release, which the classes and call sites are compared with
    chosen: str  # how the target was chosen, for people
    methods: list[MethodDrift]
    new_layers: list[LayerClass]
    gone_layers: list[LayerClass]
    new_calls: list[CallSite]
    gone_calls: list[CallSite]
    stacks: list[StackCheck]
    audit: StockAudit | None = None
    audit_note: str = ""  # why the audit did not run, or what it could not install
    diff_file: Path | None = None
    notes: list[str] = field(default_factory=list)

    def changes(self) -> list[str]:
        """What changed for the target, one phrase each (empty: nothing did)."""
        found = []
        for state in (CHANGED, GONE):
            count = sum(method.state == state for method in self.methods)
            if count:
                found.append(f"{count} replaced method{'s' if count > 1 else ''} {state}")
        if self.new_layers:
            found.append(f"{len(self.new_layers)} new cache layer classes")
        if self.new_calls:
            found.append(f"{len(self.new_calls)} new call sites")
        own = next((stack for stack in self.stacks if stack.target == self.target.name), None)
        if own is not None and own.built and not own.applies:
            found.append(f"the {own.target} stack does not apply")
        return found


def _listed(items: list, limit: int | None, indent: str = "  ") -> list[str]:
    shown = items if limit is None else items[:limit]
    lines = [f"{indent}{item}" for item in shown]
    if len(shown) < len(items):
        lines.append(f"{indent}... {len(items) - len(shown)} more (in the report file)")
    return lines


def render(report: DriftReport, limit: int | None = None) -> str:
    """The report; `limit` caps each list (the printed one), `None` lists everything (the file)."""
    target = report.target
    lines = [
        f"transformers {report.version} against target {target.name} ({report.chosen}; the {target.label}, "
        f"transformers {target.versions}, its release {report.reference})"
    ]
    states = {state: [m for m in report.methods if m.state == state] for state in (SAME, CHANGED, GONE)}
    lines.append(
        f"replaced methods: {len(report.methods)}: {len(states[SAME])} same, {len(states[CHANGED])} changed, "
        f"{len(states[GONE])} gone"
    )
    for state in (CHANGED, GONE):
        lines += [f"  {state:<8} {m.qualname.removeprefix('transformers.')}" for m in states[state]]
    if report.diff_file is not None and states[CHANGED]:
        lines.append(f"  diffs of the changed methods: {report.diff_file}")
    lines.append(
        f"cache layer classes: {len(report.new_layers)} new or newly defining crop, {len(report.gone_layers)} gone "
        f"since {report.reference}"
    )
    lines += _listed([f"new  {cls}" for cls in report.new_layers], limit)
    lines += _listed([f"gone {cls}" for cls in report.gone_layers], limit)
    lines.append(
        f"crop / activate_past_recording / is_croppable in generation/ and models/: {len(report.new_calls)} new, "
        f"{len(report.gone_calls)} gone since {report.reference}"
    )
    lines += _listed([f"new  {site}" for site in report.new_calls], limit)
    lines += _listed([f"gone {site}" for site in report.gone_calls], limit)
    lines.append(f"stacks (dist/<target>/) on the {report.version} sdist, in order:")
    for stack in report.stacks:
        if not stack.built:
            lines.append(f"  {stack.target}: not built (make branch, or utils/export_upstream_branch.py --target ...)")
            continue
        applied = sum(patch.state == APPLIES for patch in stack.patches)
        lines.append(f"  {stack.target}: {applied}/{len(stack.patches)} apply")
        for patch in stack.patches:
            detail = f": {patch.detail}" if patch.state == FAILS and patch.detail else ""
            lines.append(f"    {patch.branch:<28} {patch.state}{detail}")
    if report.audit is not None:
        counts = report.audit.counts()
        summary = ", ".join(f"{count} {kind}" for kind, count in counts.items())
        lines.append(
            f"stock audit of {report.version} with the {report.audit.table} cases: {summary} "
            f"(of {len(report.audit.rows)})" + (f"; {report.audit_note}" if report.audit_note else "")
        )
    elif report.audit_note:
        lines.append(f"stock audit: {report.audit_note}")
    lines += [f"note: {note}" for note in report.notes]
    changes = report.changes()
    lines.append("verdict: " + ("CHANGED: " + "; ".join(changes) if changes else "nothing changed for the target"))
    return "\n".join(lines) + "\n"


def render_diffs(report: DriftReport) -> str:
    return "".join(method.diff for method in report.methods if method.state == CHANGED and method.diff)


def render_audit(audit: StockAudit) -> str:
    """Every case of the stock audit, one line each."""
    return "".join(
        f"{kind:<8} {family} | {scenario} | {call} | {detail}\n" for family, scenario, call, kind, detail in audit.rows
    )

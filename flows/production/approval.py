"""A person's approval in Prefect's UI: with `promotion.auto` off and an approval timeout,
a night whose candidate passed its gate pauses, and Prefect shows a form (promote or not,
and who) on the flow run. No answer within the timeout leaves production as it is; the
same decision stays open as `flywheel promote`."""

from __future__ import annotations

from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput


class Approval(RunInput):
    promote: bool = False  # move production to the night's candidate
    by: str = ""  # who decided, for the record


async def ask_approval(version: int, reason: str, timeout_s: int) -> Approval | None:
    """Pause the night until a person answers, or None after `timeout_s` seconds."""
    form = Approval.with_initial_data(
        description=f"Promote v{version} to production? The gate: {reason}."
    )
    try:
        return await pause_flow_run(
            wait_for_input=form, timeout=timeout_s, poll_interval=min(10, max(1, timeout_s // 4))
        )
    except FlowPauseTimeout:
        return None

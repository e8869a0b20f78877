"""Counts its runs in durable state and the runs of this instance in memory."""

from cronbox_job import Context, JobFailed, job


@job
class Counter:
    def __init__(self) -> None:
        # Runs served by this instance (lost when the instance is retired).
        self.runs_here = 0

    def execute(self, ctx: Context) -> str:
        count = int(ctx.get("count") or "0") + 1
        ctx.set("count", str(count))
        self.runs_here += 1
        if ctx.param == "fail":
            raise JobFailed(f"failing on purpose after counting {count}")
        ctx.log.info("count is now %d", count)
        return f"count={count} instance_runs={self.runs_here}"

    def destroy(self) -> None:
        print(f"counter instance retired after {self.runs_here} runs")

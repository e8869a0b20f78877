"""Greets its param: the smallest Python job."""

from cronbox_job import Context, job


@job
def execute(ctx: Context) -> str:
    who = ctx.param or "world"
    ctx.log.info("greeting %s", who)
    return f"hello from python, {who}"

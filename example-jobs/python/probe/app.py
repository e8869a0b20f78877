"""A test fixture: does what its param names, to prove the sandbox holds
for Python jobs.

- ``raise``: raises an exception (a failed run with a traceback);
- ``spin``: loops forever (stopped by the timeout or a kill);
- ``hog``: allocates until the memory limit ends the run;
- ``config KEY``: answers with the configuration value of KEY;
- ``state``: writes an oversized value and answers with the error;
- ``context``: answers with the trigger's kind, shard and attempt;
- ``read PATH``: tries to read a file (denied: no preopened directory);
- ``fetch URL``: fetches URL and answers with the status and body, or the
  error's code;
- anything else: answers ``ok``.
"""

from cronbox_job import Context, StateError, http, job


@job
def execute(ctx: Context) -> str:
    verb, _, arg = ctx.param.partition(" ")
    if verb == "raise":
        raise ValueError("raised on purpose")
    if verb == "spin":
        print("spinning", flush=True)
        n = 0
        while True:
            n += 1
    if verb == "hog":
        hoard = []
        while True:
            hoard.append(bytearray(1 << 20))
    if verb == "config":
        return f"{arg}={ctx.config(arg)}"
    if verb == "state":
        try:
            ctx.set("big", "x" * (1 << 20))
        except StateError as error:
            return f"refused: {type(error).__name__}: {error}"
        return "stored"
    if verb == "context":
        return (
            f"{ctx.kind} shard {ctx.shard_index}/{ctx.shard_total} attempt {ctx.attempt}"
            f" job {ctx.job_id} run {ctx.run_id}"
        )
    if verb == "fetch":
        try:
            response = http.get(arg)
        except http.HttpError as error:
            return f"denied: {error.code}"
        return f"{response.status} {response.text()}"
    if verb == "read":
        try:
            with open(arg) as file:
                return file.read()
        except OSError as error:
            return f"denied: {error}"
    return "ok"

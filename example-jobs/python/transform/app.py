"""The middle step of the example ETL workflow (``example-jobs/etl``), run
once per record: its param is one record as JSON; its output the record
transformed. A record without a name fails the run."""

import json

from cronbox_job import Context, JobFailed, job, output


@job
def execute(ctx: Context) -> str:
    record = json.loads(ctx.param)
    name = record.get("name")
    if not name:
        raise JobFailed(f"record {record.get('id')} has no name")
    ctx.log.info("transforming record %s", record["id"])
    return output({"id": record["id"], "name": name.upper(), "length": len(name)})

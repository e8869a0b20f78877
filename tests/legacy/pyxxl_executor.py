"""A pyxxl executor (xxl-job's Python executor, from PyPI) for the legacy
group tests: started as its own process against a cronbox admin, exactly
as an xxl-job installation runs it.

Usage: python pyxxl_executor.py ADMIN_URL APPNAME LOG_DIR
(the access token in XXL_JOB_TOKEN). It listens on a loopback port of its
own choosing and prints "listening http://127.0.0.1:PORT" once it serves.

Handlers:
  echo  -- succeeds with its param, logging a line
  fail  -- fails with a message
  slow  -- logs a line, then waits until it is killed
"""

import asyncio
import os
import socket
import sys

from aiohttp import web
from pyxxl import ExecutorConfig, PyxxlRunner
from pyxxl.ctx import g

admin_url, appname, log_dir = sys.argv[1], sys.argv[2], sys.argv[3]

sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", 0))
sock.listen(128)
port = sock.getsockname()[1]

config = ExecutorConfig(
    xxl_admin_baseurl=admin_url,
    executor_app_name=appname,
    access_token=os.environ["XXL_JOB_TOKEN"],
    executor_url=f"http://127.0.0.1:{port}",
    executor_listen_host="127.0.0.1",
    executor_listen_port=port,
    executor_log_path=os.path.join(log_dir, "executor.log"),
    log_local_dir=log_dir,
    dotenv_try=False,
    http_retry_duration=1,
)
runner = PyxxlRunner(config)


@runner.register(name="echo")
async def echo():
    param = g.xxl_run_data.executorParams or ""
    g.logger.info("echoing %s", param)
    return f"echo: {param}"


@runner.register(name="fail")
async def fail():
    raise RuntimeError("the handler failed on purpose")


@runner.register(name="slow")
async def slow():
    g.logger.info("slow handler started")
    await asyncio.sleep(600)
    return "never"


async def announce(app):
    print(f"listening http://127.0.0.1:{port}", flush=True)
    yield


app = runner.create_server_app()
app.cleanup_ctx.append(announce)
web.run_app(app, sock=sock, handle_signals=True, print=None)

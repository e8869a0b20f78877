"""The dev runner: a Python job's sources run without building them.

``cronbox dev`` builds this component once (the interpreter, the standard
library and ``cronbox_job``) and then sends each run of a Python job the
job's sources with its parameter, in the run's parameter as
``{"cronbox_dev": {"files": {"app.py": "..."}, "param": "..."}}``. The
runner imports ``app`` from those files (again only when they changed,
forgetting the previous ones' modules), makes the job the ``@job`` mark
defined, and runs it as the built component would: ``init`` once per set
of sources, ``execute`` each run with the inner parameter.

A run without sources (a scheduled one) runs the sources this instance
last received; on a new instance it fails, saying ``cronbox deploy`` builds
the job for real.
"""

import hashlib
import importlib
import importlib.abc
import importlib.util
import json
import sys

import cronbox_job
import wit_world
from componentize_py_types import Err
from wit_world.imports import context as _context

_MARK = "__cronbox_dev_source__"


class _Sources(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports modules from the files sent with the run."""

    def __init__(self, files: dict) -> None:
        self.files = files

    def _file(self, fullname: str):
        base = fullname.replace(".", "/")
        if base + ".py" in self.files:
            return base + ".py", False
        if base + "/__init__.py" in self.files:
            return base + "/__init__.py", True
        return None

    def find_spec(self, fullname, path=None, target=None):
        found = self._file(fullname)
        if found is None:
            return None
        origin, package = found
        spec = importlib.util.spec_from_loader(
            fullname, self, origin=origin, is_package=package
        )
        spec.has_location = True
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        origin = module.__spec__.origin
        module.__file__ = origin
        setattr(module, _MARK, True)
        exec(compile(self.files[origin], origin, "exec"), module.__dict__)


# The sources loaded, and the job they define (its WitWorld instance).
_loaded = {"digest": None, "world": None, "finder": None}


def _load(files: dict):
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    if digest == _loaded["digest"]:
        return _loaded["world"]
    previous = _loaded["world"]
    if previous is not None:
        previous.destroy()
    _loaded.update(digest=None, world=None)
    for name, module in list(sys.modules.items()):
        if getattr(module, _MARK, False):
            del sys.modules[name]
    if _loaded["finder"] in sys.meta_path:
        sys.meta_path.remove(_loaded["finder"])
    finder = _Sources(files)
    sys.meta_path.insert(0, finder)
    _loaded["finder"] = finder
    cronbox_job._registered = None
    try:
        importlib.import_module("app")
    except Exception as error:
        raise cronbox_job._failure(error) from None
    world_class = cronbox_job._registered
    if world_class is None:
        raise Err("app.py marks no job: decorate its execute function or class with @job")
    world = world_class()
    world.init()
    _loaded.update(digest=digest, world=world)
    return world


def _envelope(param: str):
    if not param.startswith('{"cronbox_dev"'):
        return None
    try:
        sent = json.loads(param)["cronbox_dev"]
        return dict(sent["files"]), str(sent.get("param", ""))
    except (ValueError, KeyError, TypeError):
        return None


class WitWorld(wit_world.WitWorld):
    def init(self) -> None:
        pass

    def execute(self) -> str:
        param = _context.current().param
        sent = _envelope(param)
        try:
            if sent is not None:
                files, param = sent
                cronbox_job._dev_param = param
                world = _load(files)
            else:
                world = _loaded["world"]
                if world is None:
                    raise Err(
                        "this is a `cronbox dev` build: its runs come with the job's sources; "
                        "`cronbox deploy` builds and pushes the job for real"
                    )
            cronbox_job._dev_param = param
            return world.execute()
        finally:
            cronbox_job._dev_param = None

    def destroy(self) -> None:
        world = _loaded["world"]
        if world is not None:
            world.destroy()

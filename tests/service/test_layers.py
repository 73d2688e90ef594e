"""Data goes one way in the service: handler -> command -> state and store -> planner.

Read from the source (every import, those under TYPE_CHECKING too): no module imports an
HTTP handler but the handlers themselves and app.py, which mounts them; the modules of
egs_hub/service import each other without a cycle; the core imports nothing of the rest; and no
import goes the wrong way (WRONG_WAYS: the service not the simulator, the backends not embedded.py,
the metrics not the backends).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "egs_hub"


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: pathlib.Path) -> set[str]:
    """The egs_hub modules (or packages) ``path`` imports, as absolute names."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("egs_hub"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.startswith("egs_hub"):
                found.add(target)
                found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


MODULES = {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def test_only_the_app_imports_handlers():
    handlers = "egs_hub.service.handlers"
    importers = {
        name
        for name, imported in MODULES.items()
        if not name.startswith(handlers) and any(i == handlers or i.startswith(handlers + ".") for i in imported)
    }
    assert importers == {"egs_hub.service.app"}


def test_the_service_modules_import_each_other_without_a_cycle():
    service = {name: {i for i in imported if i in MODULES} for name, imported in MODULES.items()}
    service = {name: deps for name, deps in service.items() if name.startswith("egs_hub.service")}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(name) :], name]))
        if name in done or name not in service:
            return
        for dep in sorted(service[name]):
            visit(dep, (*path, name))
        done.add(name)

    for name in sorted(service):
        visit(name, ())


def test_the_core_imports_nothing_of_the_rest():
    for name, imported in MODULES.items():
        if name.startswith("egs_hub.core"):
            outside = {i for i in imported if not i.startswith("egs_hub.core")}
            assert not outside, f"{name} imports {outside}"


# (importer, what it must not import, why): the service plans and serves, the simulator replays it
# (sim/what_if.py runs in a child process, by its module name, not imported); a backend runs
# wherever the service does, not only under `egs-hub up` (embedded.py); the metrics read GPUs
# beside the backends, with NVML's helpers from nvml_handles.py.
WRONG_WAYS = [
    ("egs_hub.service", "egs_hub.sim", "the service must not import the simulator"),
    ("egs_hub.backends", "egs_hub.embedded", "a backend must not import egs-hub up's module"),
    ("egs_hub.metrics", "egs_hub.backends", "the metrics must not import the backends"),
]


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize(("importer", "imported", "why"), WRONG_WAYS, ids=[f"{a}-{b}" for a, b, _ in WRONG_WAYS])
def test_no_import_goes_the_wrong_way(importer, imported, why):
    wrong = {
        name: sorted(i for i in found if within(i, imported))
        for name, found in MODULES.items()
        if within(name, importer) and any(within(i, imported) for i in found)
    }
    assert not wrong, f"{why}: {wrong}"

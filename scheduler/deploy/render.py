"""``dynamic-scheduler render lease|static|prometheus``: the manifests, without touching a cluster.

- lease, prometheus: one multi-document YAML stream on stdout, in apply order,
  for ``kubectl apply -f -`` (or ``kubectl apply --dry-run=server -f -``).
- static: the static pod manifest on stdout, i.e. the file that goes into the
  kubelet's staticPodPath. The method needs more than that file, so
  ``--output-dir DIR`` writes everything: each file the control-plane node
  needs at its path under DIR (``DIR/etc/kubernetes/manifests/my-scheduler.yaml``,
  ``DIR/etc/kubernetes/dynamic-scheduler/{scheduler-config,policy}.yaml``:
  ``cp -r DIR/etc /`` on the node installs them) and, in beside mode,
  ``DIR/cluster-objects.yaml``, the RBAC objects to apply through the API.
  With lease or prometheus, ``--output-dir`` writes ``DIR/<method>.yaml``.

Values come from manifests/values.yaml, ``-f`` files and ``--set``; a bad one
is one line naming it (``--set replicas=x: replicas: expected an integer >= 1,
got "x"``) and exit code 1, with nothing written.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from scheduler.deploy import cmdline
from scheduler.deploy.templates import Rendered, dump_stream, render
from scheduler.logs import kv

logger = logging.getLogger(__name__)


def output_files(rendered: Rendered) -> dict[str, str]:
    """Relative path under --output-dir -> content."""
    if rendered.method != "static":
        return {f"{rendered.method}.yaml": rendered.stream()}
    out = {path.lstrip("/"): text for path, text in rendered.node_files.items()}
    if rendered.objects:
        out["cluster-objects.yaml"] = dump_stream(rendered.objects)
    return out


def write_output(rendered: Rendered, directory: str) -> list[Path]:
    written = []
    for rel, text in output_files(rendered).items():
        path = Path(directory) / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as e:
            raise cmdline.UsageError(f"--output-dir: cannot write {path}: {e.strerror or e}") from None
        logger.info("Wrote", extra=kv(file=str(path)))
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    p = cmdline.parser("render", "Render the manifests of a method to stdout (nothing is sent to a cluster).")
    cmdline.add_method(p)
    cmdline.add_values_flags(p)
    p.add_argument(
        "--output-dir",
        metavar="DIR",
        help="write every file of the method under DIR instead of printing (see the module doc)",
    )
    cmdline.add_log_flags(p)

    def body() -> int:
        ns = p.parse_args(argv)
        cmdline.setup_logging(ns.v)
        root, values = cmdline.load(ns)
        rendered = render(ns.method, values, root)
        if ns.output_dir:
            write_output(rendered, ns.output_dir)
        elif ns.method == "static":
            pod = next(
                text
                for path, text in rendered.node_files.items()
                if path.endswith(".yaml") and path.startswith(values.data["static"]["manifestDir"])
            )
            sys.stdout.write(pod)
        else:
            sys.stdout.write(rendered.stream())
        sys.stdout.flush()
        return 0

    return cmdline.run("render", body)

"""``difftest list``: the kernels the registry knows, with where each comes from; never imports
torch without ``--check``."""

from difftest.execute import adapter as registry

HELP = "list known kernels (--check: whether they can run here)"


def add_arguments(sp) -> None:
    sp.add_argument(
        "--check",
        action="store_true",
        help="load every adapter: whether it can run here, device, dtypes (imports torch)",
    )


def command(a) -> int:
    """Kernel names with where they come from; ``--check`` loads each adapter (imports
    torch and the kernel's packages) to say whether it can run here and what it claims."""
    head = ("KERNEL", "ADAPTER (module:attr)") + (("RUNS HERE", "DEVICE", "DTYPES", "DETERMINISTIC") if a.check else ())
    rows = []
    for n in registry.names():
        target = registry.describe(n)
        if not a.check:
            rows.append((n, target))
            continue
        try:
            k = registry.get(n)
            why = k.available()
            c = k.capability
            rows.append(
                (
                    n,
                    target,
                    "yes" if why is None else f"no: {why}",
                    c.device,
                    ",".join(c.dtypes),
                    "yes" if c.deterministic else "",
                )
            )
        except Exception as e:  # a broken third-party adapter must not hide the others
            rows.append((n, target, f"no: {type(e).__name__}: {e}", "", "", ""))
    w = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(x.ljust(w[i]) for i, x in enumerate(r)).rstrip())
    if not a.check:
        print("\n(`difftest list --check` loads each adapter: whether it runs here, device, dtypes)")
    return 0

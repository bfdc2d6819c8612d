"""Hardware-in-the-loop harness: the real firmware (host build on a pty, or the Cortex-M4
build in qemu-system-arm) against a simulated plant, with fault injection. Imports the
simulator lazily."""

from __future__ import annotations

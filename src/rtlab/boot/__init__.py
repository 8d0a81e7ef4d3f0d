"""Kernels on a board: `rtlab boot`. One engine changes a board's kernel, a small state
machine in which every step has its way back (machine.py): install -> load -> execute ->
wait -> verify. Each concern its own module:

    image     the version string a kernel image carries (what the running kernel must say)
    kexec     the board-side commands of the kexec method, each value quoted
    verify    the booted kernel judged against what was asked (pure)
    record    the boot's folder on the host (boot.json, console.log, dmesg.txt)
    machine   the states, the board's connection, the lock, the way back

kexec never touches the board's default boot: whatever goes wrong, a reset brings back the
kernel the board had."""

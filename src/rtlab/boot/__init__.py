"""Kernels on a board: `rtlab boot`. One engine changes a board's kernel, a small state
machine in which every step has its way back (machine.py, with steps.py's undo list):
install -> load -> execute -> wait -> verify. Each concern its own module:

    image     the version string a kernel image carries (what the running kernel must say)
    package   a Debian kernel package's image: a .deb given, or a metapackage fetched
    kexec     the board-side commands of the kexec method, each value quoted
    carry     kexec-tools carried to a board that has none
    grub      the board-side commands of GRUB's one-shot entry, its grubenv read as untrusted
    board     SSH to the board, the wait for a new boot, its console while it boots
    verify    the booted kernel judged against what was asked (pure)
    record    the boot's folder on the host (boot.json, console.log, dmesg.txt)
    steps     what the boot and the way back share: the request, the outcome, the board's
              connection, the lock and the undo list
    machine   the states of a boot, from connect to verify
    way_back  --back: the board on its default kernel, GRUB's files as they were
    ensure    a board on the kernel a measurement names (study, compare --kernel, bisect)

kexec never touches the board's default boot: whatever goes wrong, a reset brings back the
kernel the board had."""

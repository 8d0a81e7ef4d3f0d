"""rtlab boot's parts for boards that lack something: kexec carried (the commands that run it
through the carried loader, what check says), and a Debian kernel package file as KERNEL
(its architecture against the board's, its members taken on no trust). The board tests that
use both are in tests/test_boot_uboot.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rtlab.boot import carry, image, kexec, package
from rtlab.errors import UsageError
from rtlab.system import audit

BANNER = b"Linux version 6.12.9-rt-test (u@h) (gcc (Debian 14.2.0-1) 14.2.0, GNU ld 2.43) #1 SMP PREEMPT_RT"


@pytest.mark.unit
def test_a_carried_kexec_runs_through_its_loader_and_every_word_is_quoted():
    words = ("/tmp/rt lab/boot/b-1/ld-linux-riscv64-lp64d.so.1", "--library-path", "/tmp/rt lab/boot/b-1",
             "/tmp/rt lab/boot/b-1/kexec")  # fmt: skip
    load = kexec.load("/k", "root=/dev/vda $(reboot)", program=words)
    assert load.startswith(
        "'/tmp/rt lab/boot/b-1/ld-linux-riscv64-lp64d.so.1' --library-path '/tmp/rt lab/boot/b-1' "
        "'/tmp/rt lab/boot/b-1/kexec' -l /k --append 'root=/dev/vda $(reboot)'"
    ), load
    assert kexec.unload(words).endswith("'/tmp/rt lab/boot/b-1/kexec' -u")
    assert "'/tmp/rt lab/boot/b-1/kexec' -e" in kexec.execute(words)
    assert kexec.UNLOAD == "kexec -u" and "else kexec -e;" in kexec.execute()


@pytest.mark.unit
def test_the_boards_own_kexec_is_used_when_it_has_one(tmp_path):
    assert carry.on_board("/usr/sbin/kexec") and not carry.on_board("none") and not carry.on_board("")
    own = carry.tool({"kexec": "/usr/sbin/kexec\n", "arch": "riscv64"}, "/tmp/rtlab/boot/b", tmp_path)
    assert own.words == ("kexec",) and not own.carried and own.prepare is None
    assert not list(tmp_path.iterdir())  # nothing fetched
    with pytest.raises(UsageError, match="install kexec-tools on the board"):
        carry.tool({"kexec": "none", "arch": "mips"}, "/tmp/rtlab/boot/b", tmp_path)


@pytest.mark.unit
def test_check_says_kexec_is_carried_for_a_board_rtlab_can_carry_it_to():
    def said(machine: str, methods: str = "") -> tuple[str, str]:
        found = audit.audit({"kernel": {"machine": machine}, "platform": {"boot_methods": methods}})
        finding = next(f for f in found if f.item == "boot methods")
        return finding.found, finding.status

    assert said("riscv64") == ("kexec (carried)", "ok")
    assert said("x86_64", "extlinux:/boot/extlinux/extlinux.conf") == (
        "kexec (carried), extlinux:/boot/extlinux/extlinux.conf", "ok")  # fmt: skip
    assert said("riscv64", "kexec") == ("kexec", "ok")
    assert said("mips") == ("none", "info")


def _deb(folder: Path, arch: str, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    """A Debian package made by dpkg-deb, as a user's build would make one."""
    root = folder / f"root-{arch}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN/control").write_text(
        f"Package: linux-image-6.12.9-rt-test\nVersion: 6.12.9-1\nArchitecture: {arch}\n"
        "Maintainer: none <none@example.org>\nDescription: a kernel\n"
    )
    for name, data in members.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    for name, target in (links or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).symlink_to(target)
    out = folder / f"linux-image-6.12.9-rt-test_6.12.9-1_{arch}.deb"
    subprocess.run(["dpkg-deb", "-Znone", "--root-owner-group", "--build", str(root), str(out)],
                   check=True, capture_output=True)  # fmt: skip
    return out


@pytest.mark.hostile
def test_a_deb_of_the_boards_architecture_gives_its_image(tmp_path):
    kernel = b"\0" * 4096 + BANNER + b"\n\0" + b"\0" * 4096
    deb = _deb(tmp_path, "riscv64", {"usr/lib/modules/6.12.9-rt-test/vmlinuz": kernel, "etc/x": b"x"})
    found, said = package.kernel_of(deb, "riscv64", "ssh://vf2", tmp_path / "cache")
    assert found.read_bytes() == kernel and found.name == "vmlinuz-6.12.9-rt-test"
    assert said["package"] == "linux-image-6.12.9-rt-test" and said["package_version"] == "6.12.9-1"
    assert image.read(found).release == "6.12.9-rt-test"
    again, _ = package.kernel_of(deb, "riscv64", "ssh://vf2", tmp_path / "cache")  # from the cache
    assert again == found


@pytest.mark.hostile
def test_a_deb_for_another_architecture_or_without_an_image_is_one_line(tmp_path):
    amd64 = _deb(tmp_path, "amd64", {"boot/vmlinuz-6.12.9-rt-test": BANNER})
    with pytest.raises(UsageError) as e:
        package.kernel_of(amd64, "riscv64", "ssh://vf2", tmp_path / "cache")
    assert str(e.value) == (
        f"{amd64.name} is a amd64 package and ssh://vf2 is riscv64 (Debian's riscv64): "
        "give a linux-image package of riscv64"
    )
    # a link where the image would be, a release that is a path: no image is taken from it
    (tmp_path / "l").mkdir()
    linked = _deb(tmp_path / "l", "riscv64", {}, {"boot/vmlinuz-6.12.9-rt-test": "/etc/passwd"})
    with pytest.raises(UsageError, match="holds no kernel image"):
        package.kernel_of(linked, "riscv64", "ssh://vf2", tmp_path / "cache")
    small = tmp_path / "tiny.deb"
    small.write_bytes(b"!<arch>\n")
    with pytest.raises(UsageError, match="is no kernel package"):
        package.kernel_of(small, "riscv64", "ssh://vf2", tmp_path / "cache")
    junk = tmp_path / "junk.deb"
    junk.write_bytes(b"\0" * 4096)
    with pytest.raises(UsageError, match="not a Debian package"):
        package.kernel_of(junk, "riscv64", "ssh://vf2", tmp_path / "cache")
    with pytest.raises(UsageError, match="give the kernel image's path"):
        package.kernel_of(amd64, "mips", "ssh://vf2", tmp_path / "cache")


@pytest.mark.unit
def test_a_packages_damaged_gzip_image_is_one_line_and_no_file(tmp_path):
    import gzip

    whole = gzip.compress(b"\0" * 8192 + BANNER)
    for name, data in (("cut", whole[: len(whole) // 2]), ("bad", whole[:10] + b"\xff" * 64)):
        path = tmp_path / f"vmlinuz-{name}"
        path.write_bytes(data)
        with pytest.raises(UsageError, match="damaged gzip"):
            package._gunzipped(path)
        assert not path.exists()


@pytest.mark.unit
def test_an_image_member_named_xz_is_not_taken():
    # kernels._extract unpacks a member named *.xz without a bound: an image is never one
    assert package._image_name("boot/vmlinuz-6.12.9.xz", "vmlinuz-6.12.9.xz") is None
    assert package._image_name("usr/lib/modules/6.12.xz/vmlinuz", "vmlinuz") is None
    assert package._image_name("boot/vmlinuz-6.12.9", "vmlinuz-6.12.9") == "vmlinuz-6.12.9"


@pytest.mark.unit
def test_a_cached_kexec_is_taken_only_whole_and_without_links(tmp_path):
    from rtlab.cache import record

    folder = tmp_path / "carry"
    folder.mkdir()
    for name in ("kexec", "ld-linux.so.2"):
        (folder / name).write_bytes(b"\x7fELF")
    record(folder, [folder / "kexec", folder / "ld-linux.so.2"])
    (folder / "VERSION").write_text("1:2.0.25-1 bookworm ld-linux.so.2\n")
    assert carry._cached(folder) is not None
    (tmp_path / "host-file").write_bytes(b"\x7fELF")
    (folder / "kexec").unlink()
    (folder / "kexec").symlink_to(tmp_path / "host-file")  # as large as the listed one
    assert carry._cached(folder) is None
    (folder / "kexec").unlink()
    (folder / "kexec").write_bytes(b"\x7fELF")
    (tmp_path / "v").write_text("1:2.0.25-1 bookworm ld-linux.so.2\n")
    (folder / "VERSION").unlink()
    (folder / "VERSION").symlink_to(tmp_path / "v")
    assert carry._cached(folder) is None

"""``--plot`` (dpjax.cli.plots): the release and the privacy profile drawn as PNG files; another format is refused."""

import pytest
from cli_run import BASE, run_cli, write_tables


@pytest.fixture
def files(tmp_path):
    return write_tables(tmp_path)


@pytest.mark.slow
def test_plots_are_pngs(files, capsys, tmp_path):
    groups = files["dir"] / "groups.csv"
    groups.write_text("country\nFR\nDE\n")
    png = tmp_path / "release.png"
    rc, out, err = run_cli(BASE + ["--input", files["csv"], "--groups", str(groups), "--plot", str(png)], capsys)
    assert rc == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png = tmp_path / "profile.png"
    rc, out, err = run_cli(
        ["account", "--mechanism", "laplace", "--scale", "1", "--steps", "3", "--delta", "1e-5", "--plot", str(png)],
        capsys,
    )
    assert rc == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rc, out, err = run_cli(
        ["account", "--mechanism", "laplace", "--scale", "1", "--delta", "1e-5", "--plot", "x.pdf"], capsys
    )
    assert rc == 2 and ".png" in err

"""Result tables as pandas DataFrames (the optional `pandas` extra): the jobs and the time series of
a run, numbers as numbers and empty cells as NaN; without pandas, an error naming the extra."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from emulator.api import Table


def test_jobs_as_a_dataframe(tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas")
    csv = tmp_path / "jobs.csv"
    csv.write_text("job_id,pool,jct_s,queue_delay_s\n1,etl,12.5,0.5\n2,analytics,,3\n")
    frame = Table.read_csv(csv).to_dataframe()
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame.columns) == ["job_id", "pool", "jct_s", "queue_delay_s"]
    assert frame["job_id"].dtype.kind == "i" and frame["queue_delay_s"].dtype.kind == "f"
    assert frame["jct_s"].isna().tolist() == [False, True]  # an empty cell
    assert frame.groupby("pool")["queue_delay_s"].mean().to_dict() == {"analytics": 3.0, "etl": 0.5}


def test_a_notebook_shows_the_table_as_its_dataframe(monkeypatch: pytest.MonkeyPatch) -> None:
    pandas = pytest.importorskip("pandas")
    table = Table(("job_id", "pool"), [(1, "etl"), (2, "<b>")])
    assert table._repr_html_() == pandas.DataFrame(table.rows, columns=list(table.columns))._repr_html_()
    assert pandas.DataFrame(table).equals(table.to_dataframe())  # iterating gives a dict per row
    monkeypatch.setitem(sys.modules, "pandas", None)  # without pandas: a plain table, escaped
    assert "<th>pool</th>" in table._repr_html_() and "<td>&lt;b&gt;</td>" in table._repr_html_()


def test_without_pandas_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'hbemu\[pandas\]'"):
        Table(("a",), [(1,)]).to_dataframe()

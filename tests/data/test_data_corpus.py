"""Corpus readers: every error names the file and the line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.data import ParallelCorpus, read_lines, read_parallel, read_tsv


def write(path, data: bytes | str):
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def test_reads_aligned_files_with_crlf_bom_and_missing_final_newline(tmp_path):
    src = write(tmp_path / "train.de", "\ufeffEin Haus.\r\nZwei Männer.\r\n")
    tgt = write(tmp_path / "train.en", "A house.\nTwo men.")
    corpus = read_parallel(src, tgt)
    assert isinstance(corpus, ParallelCorpus)
    assert corpus.pairs == [("Ein Haus.", "A house."), ("Zwei Männer.", "Two men.")]
    assert corpus.sources == ["Ein Haus.", "Zwei Männer."]
    assert corpus.targets == ["A house.", "Two men."]
    assert len(corpus) == 2 and list(corpus) == corpus.pairs
    assert corpus.n_skipped == 0
    assert corpus.src_path == src and corpus.tgt_path == tgt


def test_different_line_counts_names_both_files_and_counts(tmp_path):
    src = write(tmp_path / "train.de", "a\nb\nc\n")
    tgt = write(tmp_path / "train.en", "a\nb\n")
    with pytest.raises(ValueError) as err:
        read_parallel(src, tgt)
    message = str(err.value)
    assert "train.de has 3 lines but" in message
    assert "train.en has 2" in message


def test_invalid_utf8_names_file_line_and_byte(tmp_path):
    src = write(tmp_path / "train.de", b"ok\nauch ok\n" + b"kaputt \xff hier\n")
    tgt = write(tmp_path / "train.en", "ok\nalso ok\nbroken here\n")
    with pytest.raises(ValueError) as err:
        read_parallel(src, tgt)
    message = str(err.value)
    assert "train.de:3:" in message
    assert "byte 7 of the line" in message  # "kaputt " is 7 bytes
    assert "ff" in message


def test_invalid_utf8_in_target_is_reported_against_the_target(tmp_path):
    src = write(tmp_path / "a.ja", "一\n二\n")
    tgt = write(tmp_path / "a.en", b"one\n\xe4\xba\n")  # truncated 3-byte character
    with pytest.raises(ValueError, match=r"a\.en:2: invalid UTF-8 at byte 0"):
        read_parallel(src, tgt)


def test_empty_lines_are_skipped_and_counted(tmp_path):
    src = write(tmp_path / "s.txt", "a\n\nc\nd\n")
    tgt = write(tmp_path / "t.txt", "A\nB\n   \nD\n")
    corpus = read_parallel(src, tgt)
    assert corpus.pairs == [("a", "A"), ("d", "D")]
    assert corpus.n_skipped == 2
    assert corpus.skipped_lines == [2, 3]


def test_empty_lines_fail_with_file_and_line_on_request(tmp_path):
    src = write(tmp_path / "s.txt", "a\nb\nc\n")
    tgt = write(tmp_path / "t.txt", "A\nB\n\n")
    with pytest.raises(ValueError, match=r"t\.txt:3: empty target line"):
        read_parallel(src, tgt, on_empty="error")
    src2 = write(tmp_path / "s2.txt", "a\n \n")
    tgt2 = write(tmp_path / "t2.txt", "A\nB\n")
    with pytest.raises(ValueError, match=r"s2\.txt:2: empty source line"):
        read_parallel(src2, tgt2, on_empty="error")


def test_bad_on_empty_value_and_missing_file(tmp_path):
    src = write(tmp_path / "s.txt", "a\n")
    with pytest.raises(ValueError, match="on_empty"):
        read_parallel(src, src, on_empty="drop")
    with pytest.raises(FileNotFoundError, match="missing.en"):
        read_parallel(src, tmp_path / "missing.en")


def test_tsv_reads_pairs(tmp_path):
    path = write(tmp_path / "pairs.tsv", "three\t三\n\nforty-two\t四十二\n")
    corpus = read_tsv(path)
    assert corpus.pairs == [("three", "三"), ("forty-two", "四十二")]
    assert corpus.skipped_lines == [2]


@pytest.mark.parametrize("line, n_tabs", [("no tab here", 0), ("a\tb\tc", 2)])
def test_tsv_line_without_exactly_one_tab(tmp_path, line, n_tabs):
    path = write(tmp_path / "pairs.tsv", f"one\t一\n{line}\n")
    with pytest.raises(ValueError) as err:
        read_tsv(path)
    assert "pairs.tsv:2:" in str(err.value)
    assert f"found {n_tabs}" in str(err.value)


def test_tsv_empty_side(tmp_path):
    path = write(tmp_path / "pairs.tsv", "one\t一\ntwo\t \n")
    assert read_tsv(path).pairs == [("one", "一")]
    with pytest.raises(ValueError, match=r"pairs\.tsv:2: empty target"):
        read_tsv(path, on_empty="error")


def test_tsv_invalid_utf8(tmp_path):
    path = write(tmp_path / "pairs.tsv", b"one\t\xe4\xb8\x80\nt\xc3wo\t\xe4\xba\x8c\n")
    with pytest.raises(ValueError, match=r"pairs\.tsv:2: invalid UTF-8 at byte 1 of the line \(byte 9 of the file\)"):
        read_tsv(path)


def test_read_lines_keeps_empty_lines_and_reports_bad_bytes(tmp_path):
    path = write(tmp_path / "input.txt", "First Citizen:\n\nBefore we proceed\r\n")
    assert read_lines(path) == ["First Citizen:", "", "Before we proceed"]
    bad = write(tmp_path / "bad.txt", b"fine\nfine\nfine\n\x80\n")
    with pytest.raises(ValueError, match=r"bad\.txt:4: invalid UTF-8 at byte 0"):
        read_lines(bad)


line_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\ufeff\x85"),
    min_size=1,
    max_size=20,
).filter(lambda s: s.strip())


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(line_text, line_text), min_size=1, max_size=8))
def test_written_pairs_read_back(tmp_path_factory, pairs):
    directory = tmp_path_factory.mktemp("corpus")
    src = write(directory / "s.txt", "".join(s + "\n" for s, _ in pairs))
    tgt = write(directory / "t.txt", "".join(t + "\n" for _, t in pairs))
    corpus = read_parallel(src, tgt)
    assert corpus.pairs == [(s.strip(), t.strip()) for s, t in pairs]

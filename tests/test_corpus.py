"""The generalization corpus (fixtures/corpus): its recorded truth and levels are
what the truth rule and the P.56 meter give on the stored WAVs, and it covers
what it claims to (synthesizers, sexes, languages, levels, trimmed and padded
clips, the synthetic signals)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from voxproxy.clips import Clip, fixtures_dir, load_corpus
from voxproxy.core.analysis.truth import TRUTH_RULE, speech_edges
from voxproxy.core.audio.levels import active_speech_level
from voxproxy.core.errors import FixtureError

CORPUS = fixtures_dir() / "corpus"
RATE = 16000
EDGE_SLACK_MS = 3.0  # a trimmed clip starts and ends within this of speech


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / "manifest.json").read_text())
    return data


@pytest.fixture(scope="module")
def corpus() -> dict[str, Clip]:
    return load_corpus()


def test_manifest_header(manifest: dict[str, Any]) -> None:
    assert manifest["truth_rule"] == TRUTH_RULE
    assert manifest["sample_rate_hz"] == RATE
    assert 24 <= len(manifest["clips"]) <= 40


def test_loader_matches_manifest(manifest: dict[str, Any], corpus: dict[str, Clip]) -> None:
    assert list(corpus) == list(manifest["clips"])
    for name, entry in manifest["clips"].items():
        c = corpus[name]
        assert c.sample_rate_hz == RATE
        assert c.kind == entry["kind"] in ("speech", "synthetic")
        assert c.synthesizer == entry["synthesizer"]
        assert c.voice == entry["voice"]
        assert c.trimmed is entry["trimmed"]
        assert c.level_dbfs == entry["level_dbfs"]
        assert c.duration_ms == pytest.approx(entry["duration_ms"], abs=0.1)
        assert c.onset_ms == entry["onset_ms"]
        assert c.offset_ms == entry["offset_ms"]
        if c.kind == "speech":
            assert c.text and c.text == entry["text"]
            assert c.sex in ("female", "male")
            assert c.language


def test_truth_is_recomputed_from_the_wavs(corpus: dict[str, Clip]) -> None:
    for c in corpus.values():
        edges = speech_edges(c.pcm, c.sample_rate_hz)
        assert edges, c.name
        assert [tuple(e) for e in edges] == list(c.segments_ms), c.name
        assert (c.onset_ms, c.offset_ms) == (edges[0][0], edges[-1][1]), c.name


def test_levels_are_measured_on_the_stored_files(corpus: dict[str, Clip]) -> None:
    for c in corpus.values():
        level = active_speech_level(c.pcm, c.sample_rate_hz)
        assert level is not None and c.level_dbfs is not None, c.name
        assert abs(level - c.level_dbfs) <= 0.5, c.name


def test_trimmed_clips_start_and_end_on_speech(corpus: dict[str, Clip]) -> None:
    for c in corpus.values():
        if c.trimmed:
            assert c.onset_ms <= EDGE_SLACK_MS, c.name
            assert c.offset_ms >= c.duration_ms - 1.0 - EDGE_SLACK_MS, c.name
            if c.kind == "speech":  # cut on a sample of speech
                assert c.pcm[0] != 0 and c.pcm[-1] != 0, c.name
            else:  # a 5-10 ms ramp: its first samples may round to zero
                sound = c.pcm.nonzero()[0]
                assert sound[0] < RATE // 1000 and sound[-1] >= c.pcm.size - RATE // 1000, c.name


def test_padded_clips_have_their_silence(manifest: dict[str, Any], corpus: dict[str, Clip]) -> None:
    for name, entry in manifest["clips"].items():
        if entry["trimmed"]:
            continue
        c = corpus[name]
        lead, tail = entry["lead_ms"], entry["tail_ms"]
        assert 100 <= lead <= 400 and 100 <= tail <= 400, name
        assert not c.pcm[: lead * RATE // 1000].any(), name
        assert not c.pcm[c.pcm.size - tail * RATE // 1000 :].any(), name
        assert c.onset_ms >= lead and c.offset_ms <= c.duration_ms - tail + 1.0, name


def test_coverage(manifest: dict[str, Any], corpus: dict[str, Clip]) -> None:
    speech = [c for c in corpus.values() if c.kind == "speech"]
    synthetic = [c for c in corpus.values() if c.kind == "synthetic"]
    assert len({c.synthesizer for c in speech}) >= 3
    assert {c.sex for c in speech} == {"female", "male"}
    assert {c.language.split("-")[0] for c in speech} >= {"en", "es"}
    for language in ("en", "es"):
        sexes = {c.sex for c in speech if c.language.startswith(language)}
        assert sexes == {"female", "male"}, language
    levels = [c.level_dbfs for c in speech if c.level_dbfs is not None]
    assert min(levels) <= -39.5 and max(levels) >= -6.5
    assert {c.trimmed for c in speech} == {True, False}
    assert {c.trimmed for c in synthetic} == {True, False}
    assert {c.voice for c in synthetic} >= {"harmonic_complex", "pink_noise_bursts", "tone_burst"}
    for c in speech:  # sentences of 1-3 s
        assert 1000.0 <= c.offset_ms - c.onset_ms <= 3000.0, c.name
    pink = [c for c in synthetic if c.voice == "pink_noise_bursts"]
    assert max(len(c.segments_ms) for c in pink) >= 2  # bursts, not one block


def test_harmonic_complex(corpus: dict[str, Clip]) -> None:
    c = next(c for c in corpus.values() if c.voice == "harmonic_complex" and c.trimmed)
    assert c.level_dbfs == pytest.approx(-20.0, abs=0.1)
    assert 2000.0 <= c.duration_ms <= 3000.0
    assert len(c.segments_ms) == 1  # the envelope never dips out of speech


def test_corpus_is_small() -> None:
    total = sum(p.stat().st_size for p in CORPUS.iterdir() if p.is_file())
    assert total < 4_000_000


def test_missing_corpus_is_a_fixture_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FixtureError, match="corpus is missing"):
        load_corpus(str(tmp_path))
    monkeypatch.setenv("VOXPROXY_FIXTURES", str(tmp_path))
    with pytest.raises(FixtureError, match="corpus is missing"):
        load_corpus.__wrapped__()


def test_missing_wav_is_a_fixture_error(manifest: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FixtureError):
        load_corpus(str(tmp_path))

"""Regenerate the speech and noise fixtures under fixtures/audio/.

Needs espeak-ng and sox (Debian packages of the same names). The output is
committed, so tests and load runs never need a synthesizer. Each clip is 16 kHz
mono 16-bit PCM; ``fixtures/audio/manifest.json`` lists its text, voice and its
true speech edges, computed once here on the clean clip by
:func:`voxproxy.core.analysis.truth.speech_edges`.

Run:  .venv/bin/python tools/make_fixtures.py
      .venv/bin/python tools/make_fixtures.py --edges-only   (new truth rule, same audio)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from voxproxy.clips import read_wav, write_wav  # noqa: E402
from voxproxy.core.analysis.truth import TRUTH_RULE, speech_edges  # noqa: E402

OUT = ROOT / "fixtures" / "audio"
RATE = 16000
LEAD_S = 0.25  # silence before the first word
TAIL_S = 0.30  # silence after the last word

# (name, role, voice, words per minute, text)
SPEECH: list[tuple[str, str, str, int, str]] = [
    (
        "agent_greeting",
        "agent",
        "en-us",
        170,
        "Hello, thanks for calling Acme support. How can I help you today?",
    ),
    (
        "agent_order_status",
        "agent",
        "en-us",
        170,
        "Sure, I can help with that. Your order is on its way and should arrive on Thursday.",
    ),
    (
        "agent_long_answer",
        "agent",
        "en-us",
        170,
        "Let me check that for you. I can see three open orders on your account. The first one "
        "shipped yesterday, the second one is being packed, and the third one is still waiting "
        "for a payment confirmation from your bank.",
    ),
    ("agent_reprompt", "agent", "en-us", 170, "Are you still there?"),
    ("agent_confirm", "agent", "en-us", 170, "Thank you. I have updated your order."),
    ("agent_ask_number", "agent", "en-us", 170, "Could you read me the order number, please?"),
    (
        "agent_hours",
        "agent",
        "en-us",
        170,
        "We are open from nine in the morning to six in the evening, Monday to Friday.",
    ),
    (
        "agent_es_order",
        "agent",
        "es",
        160,
        "Claro, le ayudo con eso. Su pedido llegará el jueves por la tarde.",
    ),
    (
        "caller_where_is_order",
        "caller",
        "en-us+f3",
        165,
        "Hi, I would like to know where my order is.",
    ),
    (
        "caller_interrupt",
        "caller",
        "en-us+f3",
        165,
        "Wait, sorry, I need to change the delivery address.",
    ),
    (
        "caller_topic_change",
        "caller",
        "en-us+f3",
        165,
        "Actually, never mind that. What are your opening hours?",
    ),
    (
        "caller_order_number",
        "caller",
        "en-us+f3",
        150,
        "My order number is 4 7 1 9, 2 8 3 6, 5 0 1 2.",
    ),
    (
        "caller_iban",
        "caller",
        "en-us+f3",
        150,
        "My IBAN is E S 9 1, 2 1 0 0, 0 4 1 8, 4 5 0 2, 0 0 0 5, 1 3 3 2.",
    ),
    ("caller_yes", "caller", "en-us+f3", 165, "Yes, please."),
    ("caller_no_dont", "caller", "en-us+f3", 165, "No, wait, don't send it."),
    ("caller_thanks", "caller", "en-us+f3", 165, "Great, thank you. Goodbye."),
    ("caller_es_pedido", "caller", "es+f3", 160, "Hola, quiero saber dónde está mi pedido."),
    ("caller_hello", "caller", "en-us+f3", 165, "Hello?"),
]

BABBLE_LINES = [
    ("en-gb", "The meeting was moved to the second floor after lunch, so bring the slides."),
    ("en-us+m3", "I think the train leaves at ten past four from platform six."),
    ("en-us+f2", "Could you pass me the sugar and the small spoon on your left?"),
    ("es", "Mañana vamos al mercado temprano para comprar fruta fresca."),
]


def run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def synth(voice: str, wpm: int, text: str, tmp: Path) -> np.ndarray:
    raw = tmp / "raw.wav"
    conv = tmp / "conv.wav"
    run(["espeak-ng", "-v", voice, "-s", str(wpm), "-w", str(raw), text])
    # -D: no dither, so silence stays digital silence and truth edges are exact.
    run(["sox", "-D", str(raw), "-r", str(RATE), "-b", "16", "-c", "1", str(conv)])
    pcm, rate = read_wav(conv)
    assert rate == RATE
    return pcm


def trim_and_pad(pcm: np.ndarray) -> np.ndarray:
    nz = np.nonzero(np.abs(pcm.astype(np.int32)) > 0)[0]
    body = pcm[nz[0] : nz[-1] + 1]
    lead = np.zeros(int(LEAD_S * RATE), dtype=np.int16)
    tail = np.zeros(int(TAIL_S * RATE), dtype=np.int16)
    return np.concatenate((lead, body, tail))


def noise_beds(tmp: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20261129)
    beds: dict[str, np.ndarray] = {}
    # Pink noise (power falling 3 dB per octave), shaped in the frequency domain, 12 s.
    n = 12 * RATE
    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1 / RATE)
    spectrum[1:] /= np.sqrt(freqs[1:])
    spectrum[0] = 0
    pink = np.fft.irfft(spectrum, n)
    beds["noise_pink"] = (pink / np.abs(pink).max() * 12000).astype(np.int16)
    # Babble: four voices talking at once, looped to 12 s.
    total = np.zeros(12 * RATE, dtype=np.float64)
    for k, (voice, text) in enumerate(BABBLE_LINES):
        line = synth(voice, 160, text, tmp).astype(np.float64)
        pos = (k * RATE) // 2
        while pos < total.size:
            n = min(line.size, total.size - pos)
            total[pos : pos + n] += line[:n]
            pos += line.size + RATE // 4
    beds["noise_babble"] = (total / np.abs(total).max() * 14000).astype(np.int16)
    return beds


def transients() -> dict[str, np.ndarray]:
    """Noise-only interruptions: a cough and a door, with silence around them."""
    rng = np.random.default_rng(7)
    out: dict[str, np.ndarray] = {}
    lead = np.zeros(int(LEAD_S * RATE), dtype=np.int16)
    tail = np.zeros(int(TAIL_S * RATE), dtype=np.int16)
    # Cough: two bursts of band-limited noise with a fast attack and decay.
    n = int(0.16 * RATE)
    t = np.arange(n) / RATE
    env = np.minimum(t / 0.01, 1.0) * np.exp(-t / 0.05)
    burst = np.convolve(rng.standard_normal(n), np.ones(6) / 6, mode="same") * env
    gap = np.zeros(int(0.08 * RATE))
    cough = np.concatenate((burst, gap, 0.6 * burst))
    out["noise_cough"] = np.concatenate(
        (lead, (cough / np.abs(cough).max() * 16000).astype(np.int16), tail)
    )
    # Door: a low thump (decaying 70 Hz sine) with a click on top.
    n = int(0.25 * RATE)
    t = np.arange(n) / RATE
    thump = np.sin(2 * np.pi * 70 * t) * np.exp(-t / 0.06)
    thump[:80] += rng.standard_normal(80) * np.linspace(1, 0, 80)
    out["noise_door"] = np.concatenate(
        (lead, (thump / np.abs(thump).max() * 20000).astype(np.int16), tail)
    )
    return out


def edge_fields(pcm: np.ndarray, rate: int = RATE) -> dict[str, object]:
    """A clip's true speech edges (TRUTH_RULE) as the manifest records them."""
    edges = speech_edges(pcm, rate)
    return {"onset_ms": edges[0][0], "offset_ms": edges[-1][1], "segments_ms": edges}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, object] = {
        "sample_rate_hz": RATE,
        "truth_rule": TRUTH_RULE,
        "clips": {},
    }
    clips = manifest["clips"]
    assert isinstance(clips, dict)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, role, voice, wpm, text in SPEECH:
            pcm = trim_and_pad(synth(voice, wpm, text, tmp))
            write_wav(OUT / f"{name}.wav", pcm, RATE)
            clips[name] = {
                "file": f"{name}.wav",
                "role": role,
                "kind": "speech",
                "voice": voice,
                "text": text,
                "duration_ms": round(1000 * pcm.size / RATE, 1),
                **edge_fields(pcm),
            }
        for name, pcm in {**noise_beds(tmp), **transients()}.items():
            write_wav(OUT / f"{name}.wav", pcm, RATE)
            kind = "bed" if name in ("noise_pink", "noise_babble") else "transient"
            entry: dict[str, object] = {
                "file": f"{name}.wav",
                "role": "noise",
                "kind": kind,
                "text": "",
                "duration_ms": round(1000 * pcm.size / RATE, 1),
            }
            if kind == "transient":
                entry.update(edge_fields(pcm))
            clips[name] = entry
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {len(clips)} clips to {OUT}")


def rederive_edges() -> None:
    """Recompute every clip's true edges from the committed WAVs under the current truth
    rule (no synthesizer needed): ``make_fixtures.py --edges-only``."""
    path = OUT / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["truth_rule"] = TRUTH_RULE
    for entry in manifest["clips"].values():
        if "segments_ms" not in entry:
            continue
        pcm, rate = read_wav(str(OUT / entry["file"]))
        entry.update(edge_fields(pcm, rate))
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"re-derived the edges of {len(manifest['clips'])} clips in {path}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--edges-only"]:
        rederive_edges()
    else:
        main()

"""Regenerate the generalization corpus under fixtures/corpus/.

Speech from three synthesizers that voxproxy's own fixtures do not use for its
figures (espeak-ng in several voices, flite, festival), male and female, English
and Spanish, plus three synthetic signals, each stored as 16 kHz mono 16-bit WAV
at a chosen ITU-T P.56 active speech level. Some clips are trimmed so that the
stream starts and ends on speech; the rest have 100-400 ms of digital silence
on each side. ``fixtures/corpus/manifest.json`` records, for every clip, its
source, its level measured on the stored file and its true speech edges from
:func:`voxproxy.core.analysis.truth.speech_edges`, also on the stored file.

Needs the Debian packages espeak-ng, flite, festival, festvox-kallpc16k,
festvox-kdlpc16k, festvox-us-slt-hts and sox. The output is committed, so tests
never need a synthesizer. Random choices use a fixed seed: a rerun with the same
package versions writes the same files.

Run:  make corpus   (or .venv/bin/python tools/make_corpus.py)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from voxproxy.clips import write_wav  # noqa: E402
from voxproxy.core.analysis.truth import TRUTH_RULE, speech_edges  # noqa: E402
from voxproxy.core.audio.levels import active_speech_level  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from make_fixtures import edge_fields  # noqa: E402

Signal = npt.NDArray[np.float64]  # full scale is 1.0
Pcm16 = npt.NDArray[np.int16]

OUT = ROOT / "fixtures" / "corpus"
RATE = 16000
SEED = 20260514
LEVEL_RANGE_DBFS = (-40.0, -6.0)  # speech levels are spread evenly over this range
PAD_RANGE_MS = (100, 400)  # silence before and after a padded clip
CEILING = 10 ** (-1.0 / 20)  # peaks above -1 dBFS go through the limiter
SPEECH_LEN_S = (1.0, 3.0)  # a synthesized sentence outside this is a mistake in the table

DEBIAN_PACKAGES = [
    "espeak-ng",
    "flite",
    "festival",
    "festvox-kallpc16k",
    "festvox-kdlpc16k",
    "festvox-us-slt-hts",
    "sox",
]


@dataclass(frozen=True)
class Line:
    name: str
    synthesizer: str  # espeak-ng | flite | festival
    voice: str  # the synthesizer's own voice name
    sex: str  # female | male
    language: str  # BCP 47
    role: str  # agent | caller
    text: str


SPEECH: list[Line] = [
    # espeak-ng: formant synthesis; a "+variant" changes pitch and timbre.
    Line(
        "espeak_en_us_m_agent",
        "espeak-ng",
        "en-us",
        "male",
        "en-US",
        "agent",
        "Thanks for calling. How can I help?",
    ),
    Line(
        "espeak_en_us_f3_caller",
        "espeak-ng",
        "en-us+f3",
        "female",
        "en-US",
        "caller",
        "Hi, I'm calling about my last bill.",
    ),
    Line(
        "espeak_en_us_f4_agent",
        "espeak-ng",
        "en-us+f4",
        "female",
        "en-US",
        "agent",
        "Your appointment is on Monday at ten.",
    ),
    Line(
        "espeak_en_gb_m_caller",
        "espeak-ng",
        "en-gb",
        "male",
        "en-GB",
        "caller",
        "What time do you close on Saturday?",
    ),
    Line(
        "espeak_es_m_agent",
        "espeak-ng",
        "es",
        "male",
        "es-ES",
        "agent",
        "Buenos días, ¿en qué puedo ayudarle?",
    ),
    Line(
        "espeak_es_f2_caller",
        "espeak-ng",
        "es+f2",
        "female",
        "es-ES",
        "caller",
        "Quiero cambiar la fecha de mi cita.",
    ),
    Line(
        "espeak_es_f4_agent",
        "espeak-ng",
        "es+f4",
        "female",
        "es-ES",
        "agent",
        "Un momento, estoy revisando su cuenta.",
    ),
    Line(
        "espeak_es419_m_caller",
        "espeak-ng",
        "es-419",
        "male",
        "es-419",
        "caller",
        "Sí, el número es cuatro, siete, dos.",
    ),
    Line(
        "espeak_es419_f3_caller",
        "espeak-ng",
        "es-419+f3",
        "female",
        "es-419",
        "caller",
        "¿Me escucha? Se cortó la llamada.",
    ),
    # flite: CMU's small engine; slt, rms and awb are clustergen/unit voices, kal a
    # diphone voice at 8 kHz (so band-limited to 4 kHz here, like a phone line).
    Line(
        "flite_slt_f_agent",
        "flite",
        "slt",
        "female",
        "en-US",
        "agent",
        "I can help you reset your password.",
    ),
    Line(
        "flite_slt_f_caller",
        "flite",
        "slt",
        "female",
        "en-US",
        "caller",
        "Can I speak to a real person, please?",
    ),
    Line(
        "flite_rms_m_agent",
        "flite",
        "rms",
        "male",
        "en-US",
        "agent",
        "Your package will arrive tomorrow morning.",
    ),
    Line(
        "flite_rms_m_caller",
        "flite",
        "rms",
        "male",
        "en-US",
        "caller",
        "Yes, that's right. Go ahead.",
    ),
    Line(
        "flite_awb_m_caller",
        "flite",
        "awb",
        "male",
        "en-GB",
        "caller",
        "Hold on, I need to find my card.",
    ),
    Line(
        "flite_kal_m_agent",
        "flite",
        "kal",
        "male",
        "en-US",
        "agent",
        "Is there anything else I can do for you?",
    ),
    # festival: diphone voices (kal, ked) and an HTS statistical voice (slt, 32 kHz).
    Line(
        "festival_kal_m_agent",
        "festival",
        "kal_diphone",
        "male",
        "en-US",
        "agent",
        "Please say or enter your account number.",
    ),
    Line(
        "festival_kal_m_caller",
        "festival",
        "kal_diphone",
        "male",
        "en-US",
        "caller",
        "I never received the refund.",
    ),
    Line(
        "festival_ked_m_agent",
        "festival",
        "ked_diphone",
        "male",
        "en-US",
        "agent",
        "I'm sorry, I didn't catch that.",
    ),
    Line(
        "festival_slt_f_agent",
        "festival",
        "cmu_us_slt_arctic_hts",
        "female",
        "en-US",
        "agent",
        "Let me transfer you to a specialist.",
    ),
    Line(
        "festival_slt_f_caller",
        "festival",
        "cmu_us_slt_arctic_hts",
        "female",
        "en-US",
        "caller",
        "Okay, thank you so much. Bye.",
    ),
    Line(
        "festival_ked_m_caller",
        "festival",
        "ked_diphone",
        "male",
        "en-US",
        "caller",
        "Can you send me the receipt by email?",
    ),
]


# ---------------------------------------------------------------------------
# Synthesis


def _run(cmd: list[str]) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(cmd, check=True, capture_output=True)
    except subprocess.CalledProcessError as exc:
        err = exc.stderr.decode(errors="replace").strip()
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed: {err}") from exc


def to_16k_float(wav: Path) -> Signal:
    """Any WAV the synthesizers write, as 16 kHz mono float samples (sox, no dither)."""
    cmd = ["sox", "-D", str(wav), "-t", "raw", "-e", "floating-point", "-b", "32"]
    raw = _run([*cmd, "-c", "1", "-r", str(RATE), "-"]).stdout
    return np.frombuffer(raw, dtype="<f4").astype(np.float64)


def synthesize(line: Line, tmp: Path) -> Signal:
    wav = tmp / f"{line.name}.wav"
    if line.synthesizer == "espeak-ng":
        _run(["espeak-ng", "-v", line.voice, "-s", "175", "-w", str(wav), line.text])
    elif line.synthesizer == "flite":
        _run(["flite", "-voice", line.voice, "-t", line.text, "-o", str(wav)])
    elif line.synthesizer == "festival":
        text_file = tmp / f"{line.name}.txt"
        text_file.write_text(line.text + "\n", encoding="latin-1")
        _run(["text2wave", "-eval", f"(voice_{line.voice})", "-o", str(wav), str(text_file)])
    else:
        raise ValueError(line.synthesizer)
    x = strip_silence(to_16k_float(wav))
    length_s = x.size / RATE
    if not SPEECH_LEN_S[0] <= length_s <= SPEECH_LEN_S[1]:
        raise SystemExit(f"{line.name}: {length_s:.2f} s of speech; keep sentences 1-3 s")
    return x


def strip_silence(x: Signal) -> Signal:
    """Drop the synthesizer's own leading and trailing near-silence (80 dB below peak)."""
    loud = np.nonzero(np.abs(x) > 1e-4 * np.abs(x).max())[0]
    return x[loud[0] : loud[-1] + 1]


# ---------------------------------------------------------------------------
# Synthetic signals


def raised_cosine_edges(x: Signal, ramp_ms: float) -> Signal:
    n = int(RATE * ramp_ms / 1000)
    ramp = 0.5 - 0.5 * np.cos(np.pi * (np.arange(n) + 0.5) / n)
    y = x.copy()
    y[:n] *= ramp
    y[-n:] *= ramp[::-1]
    return y


def smooth_noise(rng: np.random.Generator, n: int, corner_hz: float) -> Signal:
    """Gaussian noise low-passed (FFT brick wall) and scaled to peak 1."""
    spec = np.fft.rfft(rng.standard_normal(n))
    spec[np.fft.rfftfreq(n, 1 / RATE) > corner_hz] = 0
    y = np.fft.irfft(spec, n)
    return np.asarray(y / np.abs(y).max(), dtype=np.float64)


def harmonic_complex(rng: np.random.Generator, seconds: float) -> Signal:
    """A voiced-speech stand-in: f0 wandering in 120-160 Hz, 24 harmonics falling
    about 7 dB per octave, under a 4 Hz syllable envelope that stays >= 0.35 of peak."""
    n = int(seconds * RATE)
    t = np.arange(n) / RATE
    f0 = 140 + 12 * np.sin(2 * np.pi * 0.4 * t + rng.uniform(0, 2 * np.pi))
    f0 += 8 * smooth_noise(rng, n, 1.5)
    f0 = np.clip(f0, 120.0, 160.0)
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    x = np.zeros(n)
    for k in range(1, 25):
        x += k**-1.2 * np.sin(k * phase + rng.uniform(0, 2 * np.pi))
    envelope = 0.35 + 0.65 * (0.5 - 0.5 * np.cos(2 * np.pi * 4.0 * t + rng.uniform(0, np.pi)))
    return raised_cosine_edges(x * envelope, 5.0)


def pink_noise(rng: np.random.Generator, n: int) -> Signal:
    """Power falling 3 dB per octave between 50 Hz and 7 kHz."""
    spec = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1 / RATE)
    band = (freqs >= 50) & (freqs <= 7000)
    spec[~band] = 0
    spec[band] /= np.sqrt(freqs[band])
    y = np.fft.irfft(spec, n)
    return np.asarray(y / np.abs(y).max(), dtype=np.float64)


def pink_bursts(rng: np.random.Generator, bursts_ms: list[int], gaps_ms: list[int]) -> Signal:
    """Pink-noise bursts (10 ms ramps) separated by digital silence."""
    parts: list[Signal] = []
    for i, length in enumerate(bursts_ms):
        if i:
            parts.append(np.zeros(RATE * gaps_ms[i - 1] // 1000))
        parts.append(raised_cosine_edges(pink_noise(rng, RATE * length // 1000), 10.0))
    return np.concatenate(parts)


def tone_burst(freq_hz: float, ms: int) -> Signal:
    t = np.arange(RATE * ms // 1000) / RATE
    return raised_cosine_edges(np.sin(2 * np.pi * freq_hz * t), 5.0)


# ---------------------------------------------------------------------------
# Levels


def limit(x: Signal) -> Signal:
    """A look-ahead peak limiter: the gain each sample needs to stay under CEILING,
    taken as the minimum over +-10 ms and then averaged over 10 ms, so that it
    moves smoothly and never lets a peak through."""
    half = RATE // 100
    need = np.minimum(1.0, CEILING / np.maximum(np.abs(x), 1e-12))
    padded = np.pad(need, half, constant_values=1.0)
    floor = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1).min(axis=1)
    box = np.ones(half + 1) / (half + 1)
    gain = np.convolve(floor, box, mode="same")
    return np.clip(x * gain, -CEILING, CEILING)


def render(x: Signal, gain_db: float, soft_clip: bool = False) -> tuple[Pcm16, str]:
    """``x`` amplified by ``gain_db`` and quantized, and the peak control it needed:
    "none", "limiter" (clean, for peaks over the ceiling) or "soft_clip" (a tanh
    saturator, for levels the limiter cannot reach: a hot, overdriven voice)."""
    y = x * 10 ** (gain_db / 20)
    dynamics = "none"
    if soft_clip:
        y = CEILING * np.tanh(y / CEILING)
        dynamics = "soft_clip"
    elif np.abs(y).max() > CEILING:
        y = limit(y)
        dynamics = "limiter"
    pcm = np.clip(np.round(y * 32768.0), -32768, 32767).astype(np.int16)
    return pcm, dynamics


def level_of(pcm: Pcm16) -> float:
    level = active_speech_level(pcm, RATE)
    if level is None:
        raise SystemExit("a clip came out silent")
    return level


def fit_level(x: Signal, target_dbfs: float) -> tuple[Pcm16, str]:
    """Scale ``x`` so that the stored clip's P.56 active level is ``target_dbfs``
    (within 0.02 dB). Peak control flattens the level against the gain, so then
    the gain is found by bisection, with the limiter if it can get there."""
    gain = target_dbfs - level_of(render(x, 0.0)[0])
    for _ in range(4):
        pcm, dynamics = render(x, gain)
        error = target_dbfs - level_of(pcm)
        if abs(error) < 0.02:
            return pcm, dynamics
        if dynamics != "none":
            break
        gain += error
    lo, hi = gain - 3.0, gain + 40.0
    soft_clip = level_of(render(x, hi)[0]) < target_dbfs
    for _ in range(60):
        mid = (lo + hi) / 2
        pcm, dynamics = render(x, mid, soft_clip)
        error = target_dbfs - level_of(pcm)
        if abs(error) < 0.02:
            return pcm, dynamics
        lo, hi = (mid, hi) if error > 0 else (lo, mid)
    raise SystemExit(f"cannot reach {target_dbfs} dBFS (best {target_dbfs - error:.2f})")


def trim_to_speech(x: Signal, target_dbfs: float) -> tuple[Pcm16, str]:
    """Cut ``x`` to its first and last 1 ms window of speech (by the truth rule, at
    the target level), so the stored clip starts and ends on speech."""
    window = RATE // 1000
    for _ in range(6):
        pcm, dynamics = fit_level(x, target_dbfs)
        edges = speech_edges(pcm, RATE)
        start, end = int(edges[0][0]) * window, int(edges[-1][1]) * window
        if start == 0 and end >= (pcm.size // window) * window:
            return pcm, dynamics
        x = x[start:end]
    raise SystemExit("trimming to the speech edges did not settle")


# ---------------------------------------------------------------------------
# The corpus


def package_versions() -> dict[str, str]:
    versions: dict[str, str] = {}
    for package in DEBIAN_PACKAGES:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True
        )
        versions[package] = done.stdout.strip() if done.returncode == 0 else "unknown"
    return versions


def check_tools() -> None:
    missing = [t for t in ("espeak-ng", "flite", "text2wave", "sox") if not shutil.which(t)]
    if missing:
        raise SystemExit(
            f"missing {', '.join(missing)}; install with: apt-get install "
            + " ".join(DEBIAN_PACKAGES)
        )


def describe(pcm: Pcm16, dynamics: str, lead: int, tail: int) -> dict[str, object]:
    level = level_of(pcm)
    peak = int(np.abs(pcm.astype(np.int32)).max())
    return {
        "level_dbfs": round(level, 2),
        "peak_dbfs": round(20 * float(np.log10(peak / 32768.0)), 2),
        "peak_control": dynamics,
        "trimmed": lead == 0 and tail == 0,
        "lead_ms": lead,
        "tail_ms": tail,
        "duration_ms": round(1000 * pcm.size / RATE, 1),
        **edge_fields(pcm, RATE),
    }


def padded(x: Signal, lead_ms: int, tail_ms: int) -> Signal:
    return np.concatenate((np.zeros(RATE * lead_ms // 1000), x, np.zeros(RATE * tail_ms // 1000)))


def main() -> None:
    check_tools()
    rng = np.random.default_rng(SEED)
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.wav"):
        old.unlink()
    clips: dict[str, dict[str, object]] = {}

    # Speech: levels evenly over the range, shuffled over the voices; every other
    # line trimmed to its speech, the rest padded with silence.
    levels = np.round(np.linspace(*LEVEL_RANGE_DBFS, len(SPEECH)), 1)
    rng.shuffle(levels)
    with tempfile.TemporaryDirectory() as d:
        for i, (line, target) in enumerate(zip(SPEECH, levels, strict=True)):
            x = synthesize(line, Path(d))
            if i % 2 == 0:
                lead = tail = 0
                pcm, dynamics = trim_to_speech(x, float(target))
            else:
                lead, tail = (int(v) for v in rng.integers(*PAD_RANGE_MS, size=2, endpoint=True))
                pcm, dynamics = fit_level(padded(x, lead, tail), float(target))
            write_wav(OUT / f"{line.name}.wav", pcm, RATE)
            clips[line.name] = {
                "file": f"{line.name}.wav",
                "kind": "speech",
                "role": line.role,
                "synthesizer": line.synthesizer,
                "voice": line.voice,
                "language": line.language,
                "sex": line.sex,
                "text": line.text,
                **describe(pcm, dynamics, lead, tail),
            }
            print(f"{line.name:28s} {target:6.1f} dBFS  {pcm.size / RATE:4.2f} s")

    # Synthetic signals: (name, signal, generator, level, lead ms, tail ms).
    synthetic: list[tuple[str, str, Signal, float, int, int]] = [
        ("synth_harmonic_trimmed", "harmonic_complex", harmonic_complex(rng, 2.5), -20.0, 0, 0),
        ("synth_harmonic_padded", "harmonic_complex", harmonic_complex(rng, 2.0), -34.0, 250, 300),
        (
            "synth_pink_bursts_padded",
            "pink_noise_bursts",
            pink_bursts(rng, [300, 550, 400], [450, 700]),
            -28.0,
            200,
            350,
        ),
        (
            "synth_pink_bursts_trimmed",
            "pink_noise_bursts",
            pink_bursts(rng, [450, 250], [500]),
            -15.0,
            0,
            0,
        ),
        ("synth_tone_1khz_padded", "tone_burst", tone_burst(1000.0, 700), -6.0, 150, 200),
        ("synth_tone_500hz_trimmed", "tone_burst", tone_burst(500.0, 600), -40.0, 0, 0),
    ]
    for name, signal, x, target, lead, tail in synthetic:
        pcm, dynamics = fit_level(padded(x, lead, tail), target)
        write_wav(OUT / f"{name}.wav", pcm, RATE)
        clips[name] = {
            "file": f"{name}.wav",
            "kind": "synthetic",
            "role": "signal",
            "synthesizer": "numpy",
            "voice": signal,
            "language": None,
            "sex": None,
            "text": "",
            **describe(pcm, dynamics, lead, tail),
        }
        print(f"{name:28s} {target:6.1f} dBFS  {pcm.size / RATE:4.2f} s")

    manifest = {
        "sample_rate_hz": RATE,
        "truth_rule": TRUTH_RULE,
        "level_rule": "ITU-T P.56 method B active speech level of the stored file, dBFS",
        "generator": "tools/make_corpus.py",
        "seed": SEED,
        "packages": package_versions(),
        "clips": clips,
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir() if p.is_file())
    print(f"wrote {len(clips)} clips to {OUT} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()

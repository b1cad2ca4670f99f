"""Helpers shared by the tests (and the benchmarks), which the package does not ship:
scripted calls with known truth on a simulated clock (``scripted``), noise beds
(``noise``), ``voxproxy`` commands as child processes (``child``), a hand-made websocket
handshake (``rawws``), a bare session through the measurement queue (``queued``), the
outcome testbench (``testbench``), scripted ground truth
(``groundtruth``, ``spacekit``), call flows (``flowkit``), fault injection
(``faultkit``), WebRTC peers and a browser (``webrtckit``, ``browsercall``), an OTLP
receiver, receipt samples, privacy checks, event views, ports, and live calls through
the proxy for the end-to-end tests (``livecall``), a test caller for the mock agent
(``mockcaller``), the property-based tests' budgets (``fuzzing``), and the one bounded
wait for a condition that tests use instead of sleeping (``waiting.wait_until``)."""

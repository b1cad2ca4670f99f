"""One exception tree for voxproxy.

::

    VoxproxyError
     +-- ConfigError        bad configuration or command-line input (our user's mistake)
     +-- UsageError         misuse of voxproxy's own Python API (a bug in the caller)
     +-- FixtureError       a fixture or scenario file that cannot be used

Bad bytes from a peer are *not* exceptions: dialect decoders turn them into
:class:`voxproxy.core.events.Anomaly` events, and the message is still forwarded.
"""


class VoxproxyError(Exception):
    """Base class of every exception voxproxy raises on purpose."""


class ConfigError(VoxproxyError):
    """A configuration value or command-line flag is invalid."""


class UsageError(VoxproxyError):
    """voxproxy's Python API was called in a way it does not support."""


class FixtureError(VoxproxyError):
    """A fixture, scenario or recording cannot be loaded."""

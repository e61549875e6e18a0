"""What the workshop's two rooms agree on, written once.

The client (``workshop_lib``) writes model packages and calibration files and sends requests; the
adapter (``decision_adapter``, inside the endpoint) reads them. Neither imports the other, so the
formats and names both must share live here, in a package that imports nothing but the standard
library and is installed in both places (with the adapter in the image, with the workshop in Studio):

* ``manifest``: ``model-manifest.json``, its two shapes and the rules every entry follows;
* ``calibration``: ``calibration.json``, its profiles and the rules a file follows;
* ``names``: the order modes, the readouts and the question types;
* ``wire``: the wire version, the fields a decision answer names its readout and options in, and the one
  rule every answer follows (one distribution over exactly the options sent).

It is a distribution of its own (``decision-contract``, in ``container/contract``) that the adapter and the
workshop library both depend on.
"""

from .names import ORDER_MODES, QUESTION_TYPES, READOUTS
from .wire import WIRE_VERSION

__all__ = ["ORDER_MODES", "QUESTION_TYPES", "READOUTS", "WIRE_VERSION"]

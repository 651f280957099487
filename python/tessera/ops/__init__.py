"""``tessera.ops``: Graph IR ops on tensors.

Called on tensors they run at once (eager mode, the reference executor);
inside ``@tessera.jit`` they record Graph IR. One module per op family.
"""

from tessera.ops._dispatch import dispatch  # noqa: F401
from tessera.ops.elementwise import *  # noqa: F401,F403
from tessera.ops.shape import *  # noqa: F401,F403
from tessera.ops.random import *  # noqa: F401,F403
from tessera.ops.cast import *  # noqa: F401,F403
from tessera.ops.reductions import *  # noqa: F401,F403
from tessera.ops.linalg import *  # noqa: F401,F403
from tessera.ops.normalization import *  # noqa: F401,F403
from tessera.ops.creation import *  # noqa: F401,F403
from tessera.ops.sparse import *  # noqa: F401,F403
from tessera.ops.attention import *  # noqa: F401,F403
from tessera.ops.complex import *  # noqa: F401,F403
from tessera.ops.fft import *  # noqa: F401,F403

"""Translation rules, one module per ATen op family; importing this package registers them."""
from . import attention, conv, elementwise, linalg, loss, norm, pool, reduce, shape  # noqa: F401

"""Translation rules, one module per ATen op family; importing this package registers them."""
from . import elementwise, linalg, reduce, norm, conv, pool, shape, loss, attention  # noqa: F401

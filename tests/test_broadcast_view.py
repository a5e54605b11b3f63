"""``shapes.broadcast_view``: the broadcast view every op between arrays of two shapes makes
(made directly for a C-ordered operand, at about half of ``np.broadcast_to``'s cost) is
``np.broadcast_to``'s, and what does not broadcast raises as it does -- never a view past
the operand's memory."""
import numpy as np
import pytest

from tapegrad.core.shapes import broadcast_view

CASES = [  # (operand shape, target shape, shapes it does not broadcast to)
    ((5, 2), (100, 5, 2), [(100, 5, 3), (2,), (5, 1)]),
    ((1,), (3, 4), [()]),
    ((5, 1), (5, 3), [(4, 3), (5,)]),
    ((), (2, 3), []),
    ((3,), (3,), [(4,), (2, 4)]),
    ((0, 2), (4, 0, 2), [(4, 1, 2)]),
]


@pytest.mark.parametrize("src,shape,bad", CASES)
@pytest.mark.parametrize("layout", ["C", "sliced"])
def test_broadcast_view_is_broadcast_to(src, shape, bad, layout):
    v = np.arange(float(np.prod(src))).reshape(src)
    if layout == "sliced" and v.ndim:
        v = np.repeat(v, 2, axis=-1)[..., ::2]   # (not C-ordered: broadcast_to itself)
    got, want = broadcast_view(v, shape), np.broadcast_to(v, shape)
    assert got.shape == want.shape and got.strides == want.strides and not got.flags.writeable
    np.testing.assert_array_equal(got, want)
    for b in bad:
        with pytest.raises(ValueError):
            np.broadcast_to(v, b)
        with pytest.raises(ValueError):
            broadcast_view(v, b)

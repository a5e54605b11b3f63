"""Nested tuples, lists and dicts of tensors ("pytrees", as ``torch.utils._pytree``): the
arguments and results that ``tg.func`` transforms take apart and put back together."""
from __future__ import annotations


class TreeSpec:
    """The shape of a nested structure: its container type and children (a leaf: none)."""

    __slots__ = ("kind", "keys", "children")

    def __init__(self, kind=None, keys=(), children=()):
        self.kind, self.keys, self.children = kind, tuple(keys), tuple(children)

    @property
    def is_leaf(self):
        return self.kind is None

    @property
    def num_leaves(self):
        return 1 if self.is_leaf else sum(c.num_leaves for c in self.children)

    def __eq__(self, other):
        return isinstance(other, TreeSpec) and (self.kind, self.keys, self.children) == \
            (other.kind, other.keys, other.children)

    def __hash__(self):
        return hash((self.kind, self.keys, self.children))

    def __repr__(self):
        if self.is_leaf:
            return "*"
        inner = ", ".join(map(repr, self.children))
        return f"{self.kind.__name__}({inner})"


LEAF = TreeSpec()


def tree_flatten(tree):
    """(leaves in order, spec).  Tuples, lists and dicts (in their key order) are containers;
    anything else, tensors and ``None`` included, is a leaf."""
    if isinstance(tree, (tuple, list)) and not hasattr(tree, "_fields"):
        parts = [tree_flatten(t) for t in tree]
        return [x for p in parts for x in p[0]], TreeSpec(type(tree), (), [p[1] for p in parts])
    if isinstance(tree, dict):
        parts = [tree_flatten(v) for v in tree.values()]
        return ([x for p in parts for x in p[0]],
                TreeSpec(dict, tree.keys(), [p[1] for p in parts]))
    return [tree], LEAF


def tree_unflatten(leaves, spec):
    """The inverse of ``tree_flatten``."""
    it = iter(leaves)

    def build(s):
        if s.is_leaf:
            return next(it)
        kids = [build(c) for c in s.children]
        return dict(zip(s.keys, kids)) if s.kind is dict else s.kind(kids)

    return build(spec)


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def broadcast_prefix(prefix, tree, what):
    """``prefix`` (an int/None, or a structure matching the top of ``tree`` down to such
    values) given for every leaf of ``tree``: the flat list.  ``what`` names the argument in
    the ValueError raised on a mismatch."""
    if isinstance(prefix, (tuple, list, dict)):
        same = (isinstance(tree, dict) and isinstance(prefix, dict)
                and list(prefix.keys()) == list(tree.keys())) or \
            (isinstance(tree, (tuple, list)) and isinstance(prefix, (tuple, list))
             and len(prefix) == len(tree))
        if not same:
            raise ValueError(f"{what} is not compatible with the structure of `inputs`. "
                             f"{what} has structure {tree_flatten(prefix)[1]} but inputs has "
                             f"structure {tree_flatten(tree)[1]}.")
        kids = zip(prefix.values(), tree.values()) if isinstance(tree, dict) else zip(prefix,
                                                                                        tree)
        return [d for p, t in kids for d in broadcast_prefix(p, t, what)]
    return [prefix] * len(tree_flatten(tree)[0])

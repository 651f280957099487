"""Pytrees: nested tuples, lists and dicts of tensors, flattened to leaves and rebuilt.

Transforms take and return such structures (JAX's convention): arguments
differentiated as a whole, has_aux outputs, gradients shaped like their
arguments. ``None`` is an empty subtree; every other object is a leaf.
"""

from __future__ import annotations


class TreeDef:
    """The structure of a flattened pytree; ``unflatten`` rebuilds it from leaves."""

    __slots__ = ("kind", "children", "keys")

    def __init__(self, kind, children=(), keys=None):
        self.kind = kind  # "leaf", "none", tuple, list or dict
        self.children = tuple(children)
        self.keys = keys

    @property
    def num_leaves(self):
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def unflatten(self, leaves):
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"pytree expects {self.num_leaves} leaves, got {len(leaves)}")
        return self._build(iter(leaves))

    def _build(self, it):
        if self.kind == "leaf":
            return next(it)
        if self.kind == "none":
            return None
        items = [c._build(it) for c in self.children]
        if self.kind is dict:
            return dict(zip(self.keys, items))
        return self.kind(items)

    def __eq__(self, other):
        return (isinstance(other, TreeDef) and self.kind == other.kind and self.keys == other.keys
                and self.children == other.children)

    def __hash__(self):
        return hash((str(self.kind), self.keys, self.children))

    def __repr__(self):
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(repr(c) for c in self.children)
        if self.kind is dict:
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.keys, self.children))
            return "{" + inner + "}"
        return f"{self.kind.__name__}({inner})"


def flatten(tree):
    """-> (leaves, TreeDef)."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    if tree is None:
        return TreeDef("none")
    if isinstance(tree, (tuple, list)) and type(tree) in (tuple, list):
        return TreeDef(type(tree), [_flatten(t, leaves) for t in tree])
    if isinstance(tree, dict):
        keys = tuple(tree)
        return TreeDef(dict, [_flatten(tree[k], leaves) for k in keys], keys)
    leaves.append(tree)
    return TreeDef("leaf")


def tree_map(fn, tree, *rest):
    leaves, treedef = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return treedef.unflatten([fn(x, *xs) for x, *xs in zip(leaves, *others)])

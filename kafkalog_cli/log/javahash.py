"""The iteration order of a ``java.util.HashMap<Long, V>``, which is the order of the entries of
a producer snapshot (ProducerStateManager.writeSnapshot iterates its ``HashMap`` of producers).

A HashMap iterates its table of buckets in index order, and each bucket along its chain. The
chain is the insertion order of the bucket's keys until a bucket holds 9 keys in a table of 64
slots or more; it then becomes a red-black tree (``HashMap.TreeNode``) whose chain is changed by
each insertion (a new key goes after its tree parent, the root is moved to the front), resize
and removal. This module follows HashMap's own steps (putVal, resize, treeifyBin, treeify,
putTreeVal, split, removeTreeNode and the red-black balancing), keys only, so that the order
is the broker's whatever the producer ids.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional

_TREEIFY_THRESHOLD = 8
_UNTREEIFY_THRESHOLD = 6
_MIN_TREEIFY_CAPACITY = 64
_INITIAL_CAPACITY = 16


def spread_hash(key: int) -> int:
    """HashMap.hash of a Long: Long.hashCode (the two 32-bit halves xor-ed), its high half
    xor-ed into its low half, as a signed 32-bit int."""
    v = key & 0xFFFFFFFFFFFFFFFF
    h = (v ^ (v >> 32)) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


class _Node:
    """A HashMap.Node, or a TreeNode when ``tree`` is set."""

    __slots__ = ("key", "hash", "next", "prev", "parent", "left", "right", "red", "tree")

    def __init__(self, key: int, h: int, nxt: Optional["_Node"] = None,
                 tree: bool = False) -> None:
        self.key = key
        self.hash = h
        self.next = nxt
        self.tree = tree
        self.prev: Optional[_Node] = None
        self.parent: Optional[_Node] = None
        self.left: Optional[_Node] = None
        self.right: Optional[_Node] = None
        self.red = False

    def root(self) -> "_Node":
        r = self
        while r.parent is not None:
            r = r.parent
        return r


def _direction(x: _Node, p: _Node) -> int:
    """Where ``x`` goes below ``p`` in a tree bin: by hash, then by Long.compareTo."""
    if p.hash > x.hash:
        return -1
    if p.hash < x.hash:
        return 1
    return -1 if x.key < p.key else 1


def _rotate_left(root: Optional[_Node], p: Optional[_Node]) -> Optional[_Node]:
    if p is not None and p.right is not None:
        r = p.right
        rl = p.right = r.left
        if rl is not None:
            rl.parent = p
        pp = r.parent = p.parent
        if pp is None:
            root = r
            r.red = False
        elif pp.left is p:
            pp.left = r
        else:
            pp.right = r
        r.left = p
        p.parent = r
    return root


def _rotate_right(root: Optional[_Node], p: Optional[_Node]) -> Optional[_Node]:
    if p is not None and p.left is not None:
        l_ = p.left
        lr = p.left = l_.right
        if lr is not None:
            lr.parent = p
        pp = l_.parent = p.parent
        if pp is None:
            root = l_
            l_.red = False
        elif pp.right is p:
            pp.right = l_
        else:
            pp.left = l_
        l_.right = p
        p.parent = l_
    return root


def _red(n: Optional[_Node]) -> bool:
    return n is not None and n.red


def _balance_insertion(root: Optional[_Node], x: _Node) -> Optional[_Node]:
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            return root
        xppl = xpp.left
        if xp is xppl:
            xppr = xpp.right
            if _red(xppr):
                assert xppr is not None
                xppr.red = False
                xp.red = False
                xpp.red = True
                x = xpp
            else:
                if x is xp.right:
                    x = xp
                    root = _rotate_left(root, x)
                    xp = x.parent
                    xpp = None if xp is None else xp.parent
                if xp is not None:
                    xp.red = False
                    if xpp is not None:
                        xpp.red = True
                        root = _rotate_right(root, xpp)
        else:
            if _red(xppl):
                assert xppl is not None
                xppl.red = False
                xp.red = False
                xpp.red = True
                x = xpp
            else:
                if x is xp.left:
                    x = xp
                    root = _rotate_right(root, x)
                    xp = x.parent
                    xpp = None if xp is None else xp.parent
                if xp is not None:
                    xp.red = False
                    if xpp is not None:
                        xpp.red = True
                        root = _rotate_left(root, xpp)


def _balance_deletion(root: Optional[_Node], x: Optional[_Node]) -> Optional[_Node]:
    while True:
        if x is None or x is root:
            return root
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        if x.red:
            x.red = False
            return root
        xpl = xp.left
        if xpl is x:
            xpr = xp.right
            if _red(xpr):
                assert xpr is not None
                xpr.red = False
                xp.red = True
                root = _rotate_left(root, xp)
                xp = x.parent
                xpr = None if xp is None else xp.right
            if xpr is None:
                x = xp
            else:
                sl, sr = xpr.left, xpr.right
                if not _red(sr) and not _red(sl):
                    xpr.red = True
                    x = xp
                else:
                    if not _red(sr):
                        if sl is not None:
                            sl.red = False
                        xpr.red = True
                        root = _rotate_right(root, xpr)
                        xp = x.parent
                        xpr = None if xp is None else xp.right
                    if xpr is not None:
                        xpr.red = False if xp is None else xp.red
                        sr = xpr.right
                        if sr is not None:
                            sr.red = False
                    if xp is not None:
                        xp.red = False
                        root = _rotate_left(root, xp)
                    x = root
        else:
            if _red(xpl):
                assert xpl is not None
                xpl.red = False
                xp.red = True
                root = _rotate_right(root, xp)
                xp = x.parent
                xpl = None if xp is None else xp.left
            if xpl is None:
                x = xp
            else:
                sl, sr = xpl.left, xpl.right
                if not _red(sl) and not _red(sr):
                    xpl.red = True
                    x = xp
                else:
                    if not _red(sl):
                        if sr is not None:
                            sr.red = False
                        xpl.red = True
                        root = _rotate_left(root, xpl)
                        xp = x.parent
                        xpl = None if xp is None else xp.left
                    if xpl is not None:
                        xpl.red = False if xp is None else xp.red
                        sl = xpl.left
                        if sl is not None:
                            sl.red = False
                    if xp is not None:
                        xp.red = False
                        root = _rotate_right(root, xp)
                    x = root


class JavaHashOrder:
    """The keys of a ``java.util.HashMap<Long, V>`` created empty, after ``put`` and
    ``remove`` calls, in the order the map iterates them (``order``)."""

    def __init__(self, spread: Callable[[Any], int] = spread_hash) -> None:
        self.spread = spread  # HashMap.hash of a key (spread_hash: a Long's)
        self.table: List[Optional[_Node]] = []
        self.threshold = 0
        self.keys: Dict[int, None] = {}

    @property
    def capacity(self) -> int:
        return len(self.table)

    def __len__(self) -> int:
        return len(self.keys)

    def _chain(self, first: Optional[_Node]) -> Iterator[_Node]:
        while first is not None:
            yield first
            first = first.next

    def order(self) -> List[int]:
        return [n.key for first in self.table for n in self._chain(first)]

    # -- HashMap.putVal ------------------------------------------------------------------------

    def put(self, key: int) -> None:
        if key in self.keys:
            return
        h = self.spread(key)
        if not self.table:
            self._resize()
        tab = self.table
        i = (len(tab) - 1) & h
        p = tab[i]
        if p is None:
            tab[i] = _Node(key, h)
        elif p.tree:
            self._put_tree_val(p, key, h)
        else:
            bin_count = 0
            while p.next is not None:
                p = p.next
                bin_count += 1
            p.next = _Node(key, h)
            if bin_count >= _TREEIFY_THRESHOLD - 1:
                self._treeify_bin(h)
        self.keys[key] = None
        if len(self.keys) > self.threshold:
            self._resize()

    def compute_if_absent(self, key: int) -> None:
        """HashMap.computeIfAbsent: the table is resized first when it holds more than its
        threshold (a call for a key already there too), and a new key goes at the head of its
        bin, not at the tail as put puts it."""
        if not self.table or len(self.keys) > self.threshold:
            self._resize()
        if key in self.keys:
            return
        h = self.spread(key)
        tab = self.table
        i = (len(tab) - 1) & h
        first = tab[i]
        if first is not None and first.tree:
            self._put_tree_val(first, key, h)
        else:
            bin_count = sum(1 for _ in self._chain(first))
            tab[i] = _Node(key, h, first)
            if bin_count >= _TREEIFY_THRESHOLD - 1:
                self._treeify_bin(h)
        self.keys[key] = None

    def _resize(self) -> None:
        old = self.table
        old_cap = len(old)
        if old_cap:
            new_cap, self.threshold = old_cap * 2, self.threshold * 2
        else:
            new_cap, self.threshold = _INITIAL_CAPACITY, _INITIAL_CAPACITY * 3 // 4
        tab: List[Optional[_Node]] = [None] * new_cap
        self.table = tab
        for j, e in enumerate(old):
            if e is None:
                continue
            if e.next is None:
                tab[e.hash & (new_cap - 1)] = e
            elif e.tree:
                self._split(e, j, old_cap)
            else:
                lo: List[_Node] = []
                hi: List[_Node] = []
                for n in list(self._chain(e)):
                    (hi if n.hash & old_cap else lo).append(n)
                tab[j] = self._link(lo)
                tab[j + old_cap] = self._link(hi)

    @staticmethod
    def _link(nodes: List[_Node]) -> Optional[_Node]:
        for a, b in zip(nodes, nodes[1:]):
            a.next = b
        if nodes:
            nodes[-1].next = None
        return nodes[0] if nodes else None

    # -- tree bins ------------------------------------------------------------------------------

    def _treeify_bin(self, h: int) -> None:
        tab = self.table
        if len(tab) < _MIN_TREEIFY_CAPACITY:
            self._resize()
            return
        index = (len(tab) - 1) & h
        prev = None
        for n in self._chain(tab[index]):
            n.tree, n.prev = True, prev
            prev = n
        hd = tab[index]
        if hd is not None:
            self._treeify(hd)

    def _move_root_to_front(self, root: Optional[_Node]) -> None:
        tab = self.table
        if root is None or not tab:
            return
        index = (len(tab) - 1) & root.hash
        first = tab[index]
        if root is not first:
            tab[index] = root
            rp, rn = root.prev, root.next
            if rn is not None:
                rn.prev = rp
            if rp is not None:
                rp.next = rn
            if first is not None:
                first.prev = root
            root.next = first
            root.prev = None

    def _treeify(self, head: _Node) -> None:
        root: Optional[_Node] = None
        x: Optional[_Node] = head
        while x is not None:
            nxt = x.next
            x.left = x.right = None
            if root is None:
                x.parent = None
                x.red = False
                root = x
            else:
                p: Optional[_Node] = root
                while p is not None:
                    d = _direction(x, p)
                    xp = p
                    p = p.left if d <= 0 else p.right
                    if p is None:
                        x.parent = xp
                        if d <= 0:
                            xp.left = x
                        else:
                            xp.right = x
                        root = _balance_insertion(root, x)
            x = nxt
        self._move_root_to_front(root)

    def _untreeify(self, head: Optional[_Node]) -> Optional[_Node]:
        for n in self._chain(head):
            n.tree = False
            n.prev = n.parent = n.left = n.right = None
            n.red = False
        return head

    def _put_tree_val(self, first: _Node, key: int, h: int) -> None:
        root = first.root()
        x = _Node(key, h, tree=True)
        p: Optional[_Node] = root
        while p is not None:
            d = _direction(x, p)
            xp = p
            p = p.left if d <= 0 else p.right
            if p is None:
                xpn = xp.next
                x.next = xpn
                if d <= 0:
                    xp.left = x
                else:
                    xp.right = x
                xp.next = x
                x.parent = x.prev = xp
                if xpn is not None:
                    xpn.prev = x
                self._move_root_to_front(_balance_insertion(root, x))

    def _split(self, b: _Node, index: int, bit: int) -> None:
        lo: List[_Node] = []
        hi: List[_Node] = []
        for e in list(self._chain(b)):
            (hi if e.hash & bit else lo).append(e)
        for part in (lo, hi):
            prev: Optional[_Node] = None
            for e in part:
                e.prev, prev = prev, e
        tab = self.table
        lo_head, hi_head = self._link(lo), self._link(hi)
        if lo_head is not None:
            if len(lo) <= _UNTREEIFY_THRESHOLD:
                tab[index] = self._untreeify(lo_head)
            else:
                tab[index] = lo_head
                if hi_head is not None:
                    self._treeify(lo_head)
        if hi_head is not None:
            if len(hi) <= _UNTREEIFY_THRESHOLD:
                tab[index + bit] = self._untreeify(hi_head)
            else:
                tab[index + bit] = hi_head
                if lo_head is not None:
                    self._treeify(hi_head)

    # -- HashMap.removeNode ---------------------------------------------------------------------

    def remove(self, key: int) -> None:
        if key not in self.keys:
            return
        del self.keys[key]
        tab = self.table
        i = (len(tab) - 1) & self.spread(key)
        prev = None
        node = tab[i]
        while node is not None and node.key != key:
            prev, node = node, node.next
        assert node is not None
        if node.tree:
            self._remove_tree_node(node)
        elif prev is None:
            tab[i] = node.next
        else:
            prev.next = node.next

    def _remove_tree_node(self, p: _Node) -> None:
        tab = self.table
        index = (len(tab) - 1) & p.hash
        first = tab[index]
        root = first
        succ, pred = p.next, p.prev
        if pred is None:
            tab[index] = first = succ
        else:
            pred.next = succ
        if succ is not None:
            succ.prev = pred
        if first is None:
            return
        assert root is not None
        if root.parent is not None:
            root = root.root()
        if root.right is None or root.left is None or root.left.left is None:
            tab[index] = self._untreeify(first)  # too small
            return
        pl, pr = p.left, p.right
        replacement: _Node
        if pl is not None and pr is not None:
            s = pr
            while s.left is not None:  # the successor
                s = s.left
            s.red, p.red = p.red, s.red
            sr = s.right
            pp = p.parent
            if s is pr:
                p.parent = s
                s.right = p
            else:
                sp = s.parent
                p.parent = sp
                if sp is not None:
                    if s is sp.left:
                        sp.left = p
                    else:
                        sp.right = p
                s.right = pr
                pr.parent = s
            p.left = None
            p.right = sr
            if sr is not None:
                sr.parent = p
            s.left = pl
            pl.parent = s
            s.parent = pp
            if pp is None:
                root = s
            elif p is pp.left:
                pp.left = s
            else:
                pp.right = s
            replacement = sr if sr is not None else p
        elif pl is not None:
            replacement = pl
        elif pr is not None:
            replacement = pr
        else:
            replacement = p
        if replacement is not p:
            pp = replacement.parent = p.parent
            if pp is None:
                root = replacement
                replacement.red = False
            elif p is pp.left:
                pp.left = replacement
            else:
                pp.right = replacement
            p.left = p.right = p.parent = None
        r = root if p.red else _balance_deletion(root, replacement)
        if replacement is p:  # detach
            pp = p.parent
            p.parent = None
            if pp is not None:
                if p is pp.left:
                    pp.left = None
                elif p is pp.right:
                    pp.right = None
        self._move_root_to_front(r)


def spread_string_hash(key: str) -> int:
    """HashMap.hash of a String: String.hashCode, its high half xor-ed into its low half."""
    from ..format.jvmhash import improve_hash, string_hash
    return improve_hash(string_hash(key))


def java_string_hash_order(keys: Iterable[str], compute: bool = False) -> List[str]:
    """The iteration order of a new java.util.HashMap<String, V> after a ``put`` (or, with
    ``compute``, a ``computeIfAbsent``) of each of ``keys`` in this order (tree bins compare
    keys with String.compareTo: Python's str order, the same for every character of the Basic
    Multilingual Plane)."""
    table = JavaHashOrder(spread_string_hash)
    for k in keys:
        if compute:
            table.compute_if_absent(k)  # type: ignore[arg-type]
        else:
            table.put(k)  # type: ignore[arg-type]
    return table.order()  # type: ignore[return-value]


def java_hash_order(keys: Iterable[int]) -> List[int]:
    """The iteration order of a new java.util.HashMap<Long, V> into which ``keys`` were put in
    this order."""
    table = JavaHashOrder()
    for k in keys:
        table.put(k)
    return table.order()

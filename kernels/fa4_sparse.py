"""FlashAttention 4 (``flash_attn.cute``) SM90 through its block-sparse path: a Problem's
block-sparse mask or top-k selection (difftest/model/sparsity.py) as FA4's forward and backward
block-sparse tensors (``block_sparse_tensors`` / ``block_sparse_tensors_bwd`` of
``flash_attn_func``).

The translation (``Fa4BlockSparse.of``, testable without a GPU): our selection is block-aligned,
so no ``mask_mod`` is needed. Causal and windows stay FA4's own flags (``Fa4Call``), which FA4's
SM90 kernels apply to every listed block, forward and backward alike; a ``mask_mod`` would
switch those flags off (FA4 then reads causal/window from the mask_mod alone). Each selected
block that the causal/window rule leaves at least one in-bounds key of is listed for its query
block: in the *full* list where every in-bounds (query, key) pair of the block is visible, in
the *mask* (partial) list otherwise, both in ascending key-block order, as a FlexAttention
BlockMask lists them; selected blocks with nothing visible are not listed. Without a mask_mod
the two lists mean the same to FA4; splitting them runs both of its list loops and the hand-off
between them. A top-k selection is handed over as its selected set: an invalid slot (-1, past
the last block) selects nothing and a duplicate counts once (results/sparse.md), so FA4 never
sees either. The backward tensors are the same lists transposed, indexed by key block. A
Problem without sparsity is handed over as the dense pattern at 128 x 128, so every case of
this adapter runs FA4's block-sparse kernels. One pattern per sequence shape (dense problems:
one for the batch), shared by every head: [1, 1, ...] tensors FA4 broadcasts.
"""

import dataclasses
import inspect
from dataclasses import dataclass, replace

import torch

from difftest.errors import InputError
from difftest.model.inputs import Inputs
from difftest.model.problem import Problem

from .fa4 import Fa4Adapter
from .masking import selected_blocks, visible_keys

# The SM90 contract, as flash-attn-4 4.0.0b40's code states it (paths under flash_attn/cute/
# of the wheel; read for this capability, not inferred from runs):
# - public API: flash_attn_func takes ``block_sparse_tensors`` (forward, indexed by query block)
#   and ``block_sparse_tensors_bwd`` (backward, indexed by key block: "Block sparse tensors for
#   backward use Q-direction indexing (transposed from forward)", interface.py:2692); its autograd
#   function keeps the latter for the backward (interface.py:3521, 3576). Before 4.0.0b11
#   (flash-attention #2506) there was no backward argument and the autograd backward ran dense
#   (what flash-attention#2623 reported as wrong gradients): ``available`` refuses such a release.
# - varlen: refused by the backward, "Varlen backward with block sparsity is not yet supported"
#   (interface.py:2124-2130); FlashAttnVarlenFunc's forward takes block_sparse_tensors but its
#   backward passes none on (interface.py:3588-3760). So dense problems only.
# - deterministic: no SM90 deterministic block-sparse backward (flash_bwd_sm90.py:2014-2016
#   asserts "Deterministic not implemented for block-sparse backward"; config.py:2605 "the SM90
#   kernel has no deterministic block-sparse path"; the interface first wants dq_write_order and
#   spt, interface.py:2511-2527). So deterministic=False: atomics.
# - block sizes: SM90 has no key subtiling (allow_kv_subtile only on SM100, interface.py:994;
#   config.py:2595-2599), so the sparse key block must equal both kernels' tile_n: the forward
#   shrinks its tile to the sparse block (fit_sm90_tile_to_block_sparsity, config.py:282-294),
#   the backward's tile_n is 128 for head_dim <= 128, 96 up to 192, 64 above (sparse)
#   (select_sm90_bwd_tile, config.py:2994-3040; normalize_block_sparse_config_bwd,
#   block_sparsity.py:606-640 "Block sparsity expects sparse_block_size[1]=..."). 128 keys hold
#   for head_dim <= 128 only: FA4's bwd tile for 129..192 (96) tiles no 128-key block, and
#   releases before 4.0.0b39 pick a forward tile_n (112/80) that no backward tile matches
#   (flash-attention#2429, #2903). The sparse query block must be a multiple of the forward tile_m
#   (block_sparsity.py:294-345; select_sm90_tile drops 192 to 128 when the block is no multiple of
#   192, config.py:241-279) and of the backward tile_m (128, 80 or 64; 80 only where the block is
#   a multiple of 80, config.py:3005-3011; q_subtile_factor = block // tile_m, config.py:2568-2580):
#   128 and 256 both are, for every head dim up to 128.
# - what the kernels do with the lists: forward, every listed block gets FA4's causal/local
#   mask (mask_fn binds mask_causal/mask_local, flash_fwd_sm90.py:1158-1168), the mask_mod only
#   on the mask list; the lists are walked last entry first, and only the first block walked of
#   each list is masked past seqlen_k (mask_seqlen=True, block_sparse_utils.py:431-617), so the
#   tail key block must be the last entry of its list: ascending order. Backward, both lists get
#   causal/local and the seqlen mask (block_sparse_utils.py:1805-1830). Index tensors are int32 on
#   CUDA (block_sparsity.py:237-241), batch/head dims 1 broadcast (block_sparsity.py:215);
#   PackGQA wants head-broadcast masks (config.py:1845-1846), which these are.
# - index layout: every count and index tensor must have stride 1 in its last dim. FA4 binds
#   them with to_cute_tensor(t, assumed_align=4, leading_dim=-1) (block_sparsity.py:663-671;
#   4.0.0b25: 688-697), i.e. CuTe's mark_layout_dynamic(leading_dim=ndim-1)
#   (cute_dsl_utils.py:166-168), which compiles that stride in as a static 1: a first compile
#   refuses another stride ("Expected strides[leading_dim] == 1, but got N"), a kernel already
#   compiled for the key (interface.py:2529-2562 keys stride-0 dims only) refuses it at the
#   call ("Mismatched blocksparse_tensors[1].strides[3] ... expected to be 1"). PyTorch's
#   BlockMask, the producer FA4's tests use, returns its transposed (q_indices) lists in
#   contiguous_format (flex_attention.py _dense_to_ordered); so does ``_listed``: a transposed
#   view's argsort keeps the view's strides, and the backward lists used to reach FA4 with
#   stride ceil(seqlen_k / 128) on their last dim, refused whenever both sides had >= 2 blocks.
# - head dims, dtypes, GQA, sinks, softcap, windows, layouts: as kernels/fa4.py states them; none
#   is refused with block sparsity on SM90 in b40's interface.
SPARSE_SIZES = ((128, 128), (256, 128))
DENSE_SIZE = (128, 128)  # a Problem without sparsity: every block listed at this size
_DIMS = tuple(range(8, 129, 8))


def _sparse_capability():
    base = Fa4Adapter(deterministic=False).capability  # fa4-fast's
    return replace(
        base,
        head_dims_qk=_DIMS,
        head_dims_v=_DIMS,
        varlen=False,
        empty_seqs=False,
        pad_tail=False,
        block_sparse=SPARSE_SIZES,
        topk_sparse=SPARSE_SIZES,
        compile_key=base.compile_key + ("sparsity",),
    )


CAPABILITY = _sparse_capability()


@dataclass(frozen=True)
class BlockLists:
    """One direction of FA4's block-sparse tensors (CPU, int32): per row (query block forward,
    key block backward) the mask (partial) and full lists, listed entries first, ascending,
    then the row's other blocks (FlexAttention's layout); ``block_size`` is (query, key)."""

    mask_cnt: torch.Tensor  # [1, 1, rows]
    mask_idx: torch.Tensor  # [1, 1, rows, cols]
    full_cnt: torch.Tensor
    full_idx: torch.Tensor
    block_size: tuple[int, int]

    def to_fa4(self, device):
        """FA4's ``BlockSparseTensorsTorch`` of these lists on ``device``."""
        from flash_attn.cute.block_sparsity import BlockSparseTensorsTorch  # lazy: optional package

        moved = {f.name: getattr(self, f.name).to(device) for f in dataclasses.fields(self) if f.name != "block_size"}
        return BlockSparseTensorsTorch(
            mask_block_cnt=moved["mask_cnt"],
            mask_block_idx=moved["mask_idx"],
            full_block_cnt=moved["full_cnt"],
            full_block_idx=moved["full_idx"],
            block_size=self.block_size,
        )


def _listed(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[rows, cols] bool -> (counts [1, 1, rows], indices [1, 1, rows, cols]) int32, each row's
    listed columns first in ascending order, then the others; row-major (contiguous) whatever
    ``m``'s strides, as FA4 binds them (the contract comment's "index layout")."""
    rows, cols = m.shape
    order = torch.argsort((~m).to(torch.int8), dim=1, stable=True)  # keeps a transposed m's strides
    order = order.to(torch.int32, memory_format=torch.contiguous_format)  # row-major: FA4's layout
    counts = m.sum(dim=1).to(torch.int32, memory_format=torch.contiguous_format)
    return counts.view(1, 1, rows), order.view(1, 1, rows, cols)


@dataclass(frozen=True)
class Fa4BlockSparse:
    """The forward and backward block-sparse tensors FA4 gets for a Problem (module docstring)."""

    fwd: BlockLists
    bwd: BlockLists

    @staticmethod
    def of(p: Problem) -> "Fa4BlockSparse":
        if p.varlen:
            raise InputError("FA4's block-sparse backward takes dense batches only (interface.py:2124-2130)")
        bq, bk = (p.sparsity.block_q, p.sparsity.block_k) if p.sparse else DENSE_SIZE
        if (bq, bk) not in SPARSE_SIZES:
            raise InputError(f"FA4 SM90 block sparsity: {bq}x{bk} blocks not in {SPARSE_SIZES}")
        sq, sk = p.seqlens_q[0], p.seqlens_k[0]
        nq, nk = -(-sq // bq), -(-sk // bk)
        sel = selected_blocks(p, sq, sk) if p.sparse else torch.ones(nq, nk, dtype=torch.bool)
        rule = visible_keys(p.replace(sparsity=None), sq, sk)  # the causal/window rule alone

        def per_block(pad: bool) -> torch.Tensor:  # [nq, nk]: any (pad False) / all (pad True) in bounds
            grid = torch.full((nq * bq, nk * bk), pad, dtype=torch.bool)
            grid[:sq, :sk] = rule
            blocks = grid.view(nq, bq, nk, bk)
            return blocks.all(dim=3).all(dim=1) if pad else blocks.any(dim=3).any(dim=1)

        listed = sel & per_block(False)
        full = listed & per_block(True)
        partial = listed & ~full
        return Fa4BlockSparse(
            fwd=BlockLists(*_listed(partial), *_listed(full), block_size=(bq, bk)),
            bwd=BlockLists(*_listed(partial.T), *_listed(full.T), block_size=(bq, bk)),
        )

    def kwargs(self, device) -> dict:
        return dict(block_sparse_tensors=self.fwd.to_fa4(device), block_sparse_tensors_bwd=self.bwd.to_fa4(device))


def api_reason(flash_attn_func) -> str | None:
    """None when ``flash_attn_func`` takes the backward's block-sparse tensors, else why not."""
    if "block_sparse_tensors_bwd" not in inspect.signature(flash_attn_func).parameters:
        return (
            "this flash-attn-4 has no block_sparse_tensors_bwd (added in 4.0.0b11, flash-attention #2506): "
            "its autograd backward ignores the block mask"
        )
    return None


class Fa4SparseAdapter(Fa4Adapter):
    def __init__(self):
        super().__init__(deterministic=False)
        self.name = "fa4-sparse"
        self.capability = CAPABILITY
        self.description = "flash_attn.cute (FA4) SM90 block-sparse forward+backward (atomics), block masks and top-k"

    def available(self) -> str | None:
        why = super().available()
        if why:
            return why
        from flash_attn.cute import flash_attn_func  # lazy: flash-attn-4 is optional

        return api_reason(flash_attn_func)

    def call_extras(self, inputs: Inputs) -> dict:
        return Fa4BlockSparse.of(inputs.problem).kwargs(inputs.device)


def sparse():
    return Fa4SparseAdapter()

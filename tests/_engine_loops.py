"""Second, independent implementations of the engine conventions in ``specdec.engines``.

Written as scalar loops in the shape of the engines' kernels (a program per request, a loop over
its positions), from the same written convention and not from the vectorised references, so
that an equal-tokens test between the two is a real check of each. Float32 arithmetic is done on
0-d float32 tensors (the kernels compute in float32); comparisons with float64 uniforms are
done in float64, as a float32 value promotes exactly.
"""

from collections.abc import Iterator

import torch
from torch import Tensor


def vllm_v1_loop(
    draft_token_ids: Tensor,
    cu_num_draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    bonus_token_ids: Tensor,
    uniform_probs: Tensor,
    exponentials: Tensor,
    is_greedy: Tensor | None,
    max_spec_len: int,
) -> Tensor:
    batch, vocab = cu_num_draft_tokens.shape[0], target_probs.shape[1]
    out = torch.full((batch, max_spec_len + 1), -1, dtype=torch.int32)
    for request in range(batch):
        start = 0 if request == 0 else int(cu_num_draft_tokens[request - 1])
        end = int(cu_num_draft_tokens[request])
        greedy = is_greedy is not None and bool(is_greedy[request])
        rejected = False
        for pos in range(end - start):
            if rejected:
                break
            t = start + pos
            draft = int(draft_token_ids[t])
            if greedy:
                best = max(range(vocab), key=lambda v: (float(target_probs[t, v]), -v))
                out[request, pos] = best
                rejected = best != draft
                continue
            draft_prob = torch.tensor(1.0) if draft_probs is None else draft_probs[t, draft]
            target_prob = target_probs[t, draft]
            ok = float(draft_prob) > 0 and float(target_prob / draft_prob) >= float(
                uniform_probs[t]
            )
            if ok:
                out[request, pos] = draft
                continue
            rejected = True
            best_v, best_score = 0, -1.0
            for v in range(vocab):
                if draft_probs is None:
                    weight = 0.0 if v == draft else float(target_probs[t, v])
                else:
                    weight = max(float(target_probs[t, v] - draft_probs[t, v]), 0.0)
                score = float(torch.tensor(weight) / exponentials[request, v])
                if score > best_score:
                    best_v, best_score = v, score
            out[request, pos] = best_v
        if not rejected:
            out[request, end - start] = int(bonus_token_ids[request, 0])
    return out


def hf_loop(
    drafts: list[int],
    candidate_logits: Tensor,
    new_logits: Tensor,
    uniforms: Tensor,
    exponentials: Tensor,
) -> list[int]:
    draft_rows = torch.softmax(candidate_logits[0], dim=-1)
    target_rows = torch.softmax(new_logits[0], dim=-1)
    emitted: list[int] = []
    for i, draft in enumerate(drafts):
        ratio = target_rows[i, draft] / draft_rows[i, draft]
        if bool(uniforms[i] <= ratio):
            emitted.append(draft)
            continue
        pairs = zip(target_rows[i], draft_rows[i], strict=True)
        weights = [max(float(a - b), 0.0) for a, b in pairs]
        total = float(torch.tensor(weights, dtype=target_rows.dtype).sum())
        row = [torch.tensor(w, dtype=target_rows.dtype) / total for w in weights]
        return [*emitted, _race(row, exponentials[0])]
    row = list(target_rows[len(drafts)])
    return [*emitted, _race(row, exponentials[0])]


def _race(row: list[Tensor], exponentials: Tensor) -> int:
    scores = [float(w / e) for w, e in zip(row, exponentials, strict=True)]
    return max(range(len(scores)), key=lambda v: (scores[v], -v))


def sglang_loop(
    candidates: Tensor,
    retrive_index: Tensor,
    next_token: Tensor,
    next_sibling: Tensor,
    coins: Tensor,
    final_coins: Tensor,
    target_probs: Tensor,
    draft_probs: Tensor,
    depth: int,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
) -> tuple[list[int], list[list[int]], list[int]]:
    """SGLang's kernel as one program per request in numpy float32, mutating its own copy of the
    draft rows as the kernel does; undefined outputs are -1."""
    import numpy as np

    batch, nodes = candidates.shape
    target = target_probs.numpy().astype(np.float32)
    draft = draft_probs.numpy().astype(np.float32).copy()
    u_all = coins.numpy().astype(np.float32)
    predicts = [-1] * (batch * nodes)
    accept_index = [[-1] * depth for _ in range(batch)]
    accept_num = [0] * batch
    t_single, t_acc = np.float32(threshold_single), np.float32(max(threshold_acc, 1e-9))
    for b in range(batch):
        coin = u_all[b, 0]
        last = int(retrive_index[b, 0])
        accept_index[b][0] = last
        accepted, cur, prob_acc = 0, 0, np.float32(0.0)
        for _ in range(1, depth):
            cur_child = int(next_token[b, cur])
            while cur_child != -1:
                token = int(candidates[b, cur_child])
                single = target[b, cur, token]
                prob_acc = np.float32(prob_acc + single)
                if coin <= np.float32(prob_acc / t_acc) or single >= t_single:
                    prob_acc = np.float32(0.0)
                    cur = cur_child
                    coin = u_all[b, cur]
                    predicts[last] = token
                    accepted += 1
                    last = int(retrive_index[b, cur])
                    accept_index[b][accepted] = last
                    break
                draft[b, cur, token] = target[b, cur, token]
                cur_child = int(next_sibling[b, cur_child])
            if cur_child == -1:
                break
        accept_num[b] = accepted
        row_p = target[b, cur]
        row_q = draft[b, cur] if accepted != depth - 1 else np.zeros_like(row_p)
        relu = np.maximum(row_p - row_q, np.float32(0.0)).astype(np.float32)
        total = np.float32(0.0)
        for value in relu:
            total = np.float32(total + value)
        threshold = np.float32(np.float32(final_coins[b]) * total)
        chosen, running = relu.shape[0] - 1, np.float32(0.0)
        for v, value in enumerate(relu):
            running = np.float32(running + value)
            if value > 0 and running > threshold:
                chosen = v
                break
        predicts[last] = chosen
    return predicts, accept_index, accept_num


def flashinfer_loop(
    draft_probs: Tensor, draft_token_ids: Tensor, target_probs: Tensor, uniforms: Tensor
) -> tuple[list[list[int]], list[int], list[int]]:
    """FlashInfer's chain kernel as one program per request in numpy float32, each
    ``curand_uniform`` call taking the next coin of the request's stream: a first loop until the
    first rejection, a second one re-testing the drafts from there on, then the inverse-CDF draw
    (undefined token: -2)."""
    import numpy as np

    batch, k = draft_token_ids.shape
    draft = draft_probs.numpy().astype(np.float32)
    target = target_probs.numpy().astype(np.float32)
    out = [[-1] * (k + 1) for _ in range(batch)]
    accepted_num, emitted_num = [0] * batch, [0] * batch
    for b in range(batch):
        stream = iter(uniforms[b].numpy().astype(np.float32).tolist())

        def curand_uniform(stream: Iterator[float] = stream) -> np.float32:
            return np.float32(next(stream))  # the request's own stream, one call at a time

        def passes(i: int, coin: np.float32, b: int = b) -> bool:
            token = int(draft_token_ids[b, i])
            return bool(np.float32(coin * draft[b, i, token]) < target[b, i, token])

        pos = k
        for i in range(k):
            if passes(i, curand_uniform()):
                out[b][i] = int(draft_token_ids[b, i])
            else:
                pos = i
                break
        accepted = pos
        for i in range(pos, k):
            accepted += passes(i, curand_uniform())
        accepted_num[b], emitted_num[b] = accepted, pos
        row_q = draft[b, pos] if pos < k else np.zeros_like(target[b, pos])
        relu = np.maximum(target[b, pos] - row_q, np.float32(0.0)).astype(np.float32)
        total = np.float32(0.0)
        for value in relu:
            total = np.float32(total + value)
        threshold = np.float32(curand_uniform() * total)
        chosen, running, last_valid = -1, np.float32(0.0), -2
        for v, value in enumerate(relu):
            running = np.float32(running + value)
            if value > 0:
                last_valid = v
                if running > threshold:
                    chosen = v
                    break
        out[b][pos] = chosen if chosen >= 0 else last_valid
    return out, accepted_num, emitted_num


def trtllm_loop(
    drafts: list[int],
    draft_probs: Tensor,
    target_probs: Tensor,
    bonus_token: int,
    uniforms: Tensor,
    exponentials: Tensor,
) -> list[int]:
    """TensorRT-LLM's rejection sampling as a plain loop over the drafts (0-d float32 tensors
    for the kernel's float32 arithmetic); a zero residual returns [] (the engine raises)."""
    emitted: list[int] = []
    for i, draft in enumerate(drafts):
        ratio = target_probs[i, draft].float() / draft_probs[i, draft].float()
        bound = ratio if bool(ratio.isnan()) else torch.clamp(ratio, max=1.0)
        if not bool(uniforms[i].float() > bound):
            emitted.append(draft)
            continue
        weights = [
            max(float(target_probs[i, v].float() - draft_probs[i, v].float()), 0.0)
            for v in range(target_probs.shape[1])
        ]
        if sum(weights) == 0:
            return []
        row = [torch.tensor(w, dtype=torch.float32) for w in weights]
        return [*emitted, _race(row, exponentials.float())]
    return [*emitted, bonus_token]

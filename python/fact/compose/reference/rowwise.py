"""CPU reference of a row-wise op (rowwise_<id>, templates/rowwise/rowwise_op.cpp.in): replays the registered
fragment carried in the manifest entry's config with PyTorch's ops in float64, rounded once to the inputs' dtype."""


def _rowwise(fragment):
    # The replayer is the fact package's (the agent's fragment format), so this family needs FACT installed.
    from fact.agent.fragment_replay import replay
    broadcast = [bool(s.get("broadcast", False)) for s in fragment["inputs"]]

    def rowwise(*inputs):
        if len(inputs) != len(broadcast):
            raise ValueError(f"row-wise op takes {len(broadcast)} inputs, got {len(inputs)}")
        full = next((t for t, b in zip(inputs, broadcast) if not b), None)
        y = replay(fragment, [t.double() for t in inputs]).to(inputs[0].dtype)
        # As the op: a contiguous tensor shaped like the first full input, or one value per row; with no full input
        # (a pool's input alone), the pool's output as the fragment makes it.
        if full is None or y.numel() != full.numel():
            return y.contiguous()
        return y.reshape(full.shape).contiguous()

    return rowwise


def reference_op(entry):
    """(schema, implementation, key) of a row-wise op's manifest entry; the key names the fragment's source."""
    config = entry.get("config") or {}
    fragment = config.get("fragment")
    if not isinstance(fragment, dict) or not fragment.get("inputs"):
        raise ValueError(f"op {entry['op']}: the rowwise config carries no fragment to replay")
    params = ", ".join(f"Tensor in{i}" for i in range(len(fragment["inputs"])))
    return (f"({params}) -> Tensor", _rowwise(fragment),
            f"rowwise {config.get('entry') or 'generated'} {config.get('source_hash') or config.get('kernel')}")

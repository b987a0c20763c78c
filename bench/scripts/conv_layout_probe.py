"""How much of torch.compile's lead on conv chains is the memory format (GPU only).

Inductor runs convolutions channels-last (its layout optimization) and converts back in the fused pass after them.
This times, per KernelBench problem, the original module as given (channels-first), the same module and input
converted to channels-last (weights converted once, the input and the result on every call), and the model's first
convolution alone in both formats. Usage:
  PYTHONPATH=python python3 bench/scripts/conv_layout_probe.py OUT.json PROBLEM.py...   (on the GPU)
  python3 bench/scripts/conv_layout_probe.py --markdown OUT.json COMMIT                 (OUT.md from OUT.json)
"""
import copy
import datetime
import importlib.util
import json
import sys
from pathlib import Path

import torch

from fact.realize.timing import median_us


def load(path):
    spec = importlib.util.spec_from_file_location(Path(path).stem.replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_ms(fn, reps=15):
    return median_us(fn, reps=reps, warmup=3) / 1e3


def probe(path):
    m = load(path)
    torch.manual_seed(0)
    model = m.Model(*m.get_init_inputs()).cuda().eval()
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in m.get_inputs()]
    x = inputs[0]
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d if x.dim() == 5 else None
    row = {"problem": Path(path).stem}
    if fmt is None:
        row["skipped"] = f"input has {x.dim()} dims (no channels-last format)"
        return row
    model_cl = copy.deepcopy(model)
    for param in model_cl.parameters():  # the filters; a module's other tensors keep their layout
        if param.dim() == x.dim():
            param.data = param.data.contiguous(memory_format=fmt)
    with torch.no_grad():
        ref = model(*inputs)
        cl_inputs = lambda: [t.contiguous(memory_format=fmt) if t is x else t for t in inputs]  # noqa: E731
        got = model_cl(*cl_inputs()).contiguous()
        row["max_abs_diff"] = float((got - ref).abs().max())
        row["eager_ms"] = median_ms(lambda: model(*inputs))
        row["channels_last_ms"] = median_ms(lambda: model_cl(*cl_inputs()).contiguous())
        row["channels_last_kept_output_ms"] = median_ms(lambda: model_cl(*cl_inputs()))
        conv = next((c for c in model.modules() if isinstance(c, torch.nn.modules.conv._ConvNd)), None)
        if conv is not None:
            conv_cl = copy.deepcopy(conv).to(memory_format=fmt)
            x_cl = x.contiguous(memory_format=fmt)
            row["conv"] = type(conv).__name__
            row["conv_nchw_ms"] = median_ms(lambda: conv(x))
            row["conv_cl_ms"] = median_ms(lambda: conv_cl(x_cl))
            row["conv_cl_converted_ms"] = median_ms(lambda: conv_cl(x.contiguous(memory_format=fmt)).contiguous())
            row["input_to_cl_ms"] = median_ms(lambda: x.contiguous(memory_format=fmt))
    return row


COLUMNS = [("eager_ms", "eager"), ("channels_last_ms", "channels-last, result made contiguous"),
           ("channels_last_kept_output_ms", "channels-last, result kept"), ("conv_nchw_ms", "conv alone, NCHW"),
           ("conv_cl_ms", "conv alone, channels-last input"), ("conv_cl_converted_ms", "conv alone, converted in and out"),
           ("input_to_cl_ms", "input to channels-last")]


def markdown(path, commit):
    data = json.loads(Path(path).read_text())
    lines = [f"# Convolutions by memory format ({data['device']}, {data['date']}, commit {commit})", "",
             "`bench/scripts/conv_layout_probe.py`: PyTorch only (no FACT kernel), fp32 tensors, cuDNN with TF32 "
             f"allowed ({data['cudnn_allow_tf32']}, PyTorch's default), median ms of 15 CUDA-event-timed calls.", "",
             "| problem | " + " | ".join(title for _, title in COLUMNS) + " | note |",
             "|---|" + "---|" * (len(COLUMNS) + 1)]
    for row in data["rows"]:
        cells = [f"{row[key]:.3f}" if key in row else "-" for key, _ in COLUMNS]
        lines.append(f"| {row['problem']} | " + " | ".join(cells) + f" | {row.get('error', row.get('skipped', ''))} |")
    Path(path).with_suffix(".md").write_text("\n".join(lines) + "\n")


def main():
    if sys.argv[1] == "--markdown":
        return markdown(sys.argv[2], sys.argv[3])
    out, paths = sys.argv[1], sys.argv[2:]
    rows = []
    for p in paths:
        try:
            row = probe(p)
        except Exception as e:  # noqa: BLE001 - one problem's failure is a row, not the end of the probe
            row = {"problem": Path(p).stem, "error": f"{type(e).__name__}: {e}"[:300]}
        torch.cuda.empty_cache()
        rows.append(row)
        keys = ["eager_ms", "channels_last_ms", "channels_last_kept_output_ms", "conv_nchw_ms", "conv_cl_ms",
                "conv_cl_converted_ms", "input_to_cl_ms"]
        print(row["problem"][:44].ljust(44), " ".join(f"{row[k]:8.3f}" if k in row else "       -" for k in keys),
              row.get("error", row.get("skipped", "")), flush=True)
    device = torch.cuda.get_device_name()
    Path(out).write_text(json.dumps({"device": f"{device} (torch {torch.__version__})",
                                     "date": datetime.date.today().isoformat(),
                                     "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

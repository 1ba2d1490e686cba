"""The whole kernel surface of Transformers 5.25, per model family (issue 43): the exact set of repos
`kernlock lock` locks for a declared tiny config on a CUDA target.

Each family's `config.json` is all that is declared, as a saved checkpoint has it. The sets come from
Transformers' kernelize mapping, the model's own `get_kernel` calls, its quantizer and its attention
swap; none of them depends on `ninja` or a GPU being where the lock is made.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import CPU, CUDA_130, FA2, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.hub import TestHub
from scripts import families

KC = "kernels-community/"
DENSE = {FA2, f"{KC}liger-kernels@v4", f"{KC}rotary@v2", f"{KC}activation@v1"}
EXPECTED = {
    "llama": DENSE,
    "qwen3": DENSE,
    "qwen3_moe": DENSE,
    "mixtral": DENSE,
    "gpt_oss": {FA2, f"{KC}rotary@v2", f"{KC}vllm-flash-attn3@v1"},
    "gpt_oss_mxfp4": {FA2, f"{KC}rotary@v2", f"{KC}vllm-flash-attn3@v1", f"{KC}gpt-oss-triton-kernels@v1"},
    # fp8's integration loads finegrained-fp8 and, on Hopper/Blackwell, DeepGEMM's linear and sonic-moe's experts
    "deepseek_v3_fp8": {FA2, f"{KC}liger-kernels@v4", f"{KC}activation@v1", f"{KC}finegrained-fp8@v4",
                        f"{KC}deep-gemm@v2", f"{KC}sonic-moe@ep-support"},
    "qwen3_next": {FA2, f"{KC}activation@v1", f"{KC}fla@v3", f"{KC}mamba-ssm@v5"},
    "mamba2": {FA2, f"{KC}activation@v1", f"{KC}mamba-ssm@v5"},
    "falcon_mamba": {FA2, f"{KC}activation@v1", f"{KC}liger-kernels@v4", f"{KC}mamba-ssm@v5"},
    "jamba": DENSE | {f"{KC}mamba-ssm@v5"},
    "falcon_h1": DENSE | {f"{KC}mamba-ssm@v5"},
    "rwkv": {FA2, f"{KC}rwkv@v1"},
    "granitemoe_swa": DENSE | {f"{KC}vllm-flash-attn3@v1"},
    "yoso": {FA2, f"{KC}activation@v1", f"{KC}yoso@v1"},
    "mra": {FA2, f"{KC}activation@v1", f"{KC}mra@v1"},
}


def _project(root: Path, family: str, targets: list[str]) -> Path:
    project = make_project(root, kernels=[FA2], targets=targets, extra='\nmodels = ["./model"]')
    families.save(root / "configs", only=family)
    (project / "model").mkdir()
    (project / "model" / "config.json").write_bytes((root / "configs" / family / "config.json").read_bytes())
    return project


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_each_family_locks_exactly_what_transformers_loads_for_it(hub: TestHub, tmp_path: Path, family: str) -> None:
    project = _project(tmp_path, family, [CUDA_130, CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    lock = load_lockfile(project / "kernels.lock")
    assert {k.spec for k in lock.kernels} == EXPECTED[family]
    for entry in lock.kernels:
        if entry.spec != FA2:  # what the model brings in is needed on CUDA only, and says who asked
            assert entry.devices == ("cuda",) and entry.used_by, entry
            assert entry.variant_for(CUDA_130) is not None and entry.variant_for(CPU) is None
    [model] = lock.models
    assert model.layers and all(" -> " in layer for layer in model.layers)


def test_call_sites_are_named_in_the_lock_and_in_show(hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path, "rwkv", [CUDA_130])
    assert cli("lock", cwd=project).exit_code == 0
    [rwkv] = [k for k in load_lockfile(project / "kernels.lock").kernels if k.repo == f"{KC}rwkv"]
    assert rwkv.used_by == ("./model: model code at models/rwkv/modeling_rwkv.py:52 (cuda: inference, training)",)
    assert "models/rwkv/modeling_rwkv.py:52" in cli("show", cwd=project).output


@pytest.mark.parametrize(("implementation", "spec"), [("sonicmoe", f"{KC}sonic-moe@ep-support"),
                                                      ("deepgemm", f"{KC}deep-gemm@v2")])
def test_an_experts_implementation_in_the_config_locks_its_kernel(hub: TestHub, tmp_path: Path,
                                                                 implementation: str, spec: str) -> None:
    project = _project(tmp_path, "qwen3_moe", [CUDA_130])
    config = project / "model" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "experts_implementation": implementation}))
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    specs = {k.spec for k in load_lockfile(project / "kernels.lock").kernels}
    assert specs == DENSE | {spec}


def test_a_dequantized_mxfp4_checkpoint_needs_no_triton_kernels(hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path, "gpt_oss_mxfp4", [CUDA_130])
    config = project / "model" / "config.json"
    data = json.loads(config.read_text())
    data["quantization_config"]["dequantize"] = True
    config.write_text(json.dumps(data))
    assert cli("lock", cwd=project).exit_code == 0
    assert {k.spec for k in load_lockfile(project / "kernels.lock").kernels} == EXPECTED["gpt_oss"]


def _qwen3_5(project: Path) -> None:
    """A tiny Qwen3.5 (text) config: its GatedDeltaNet layer is mapped to `Atlas-Inference/gdn` only for
    CUDA capability 12.1 (GB10), through the mapping's own `CUDAProperties(min_capability=121)`."""
    import transformers

    config = transformers.Qwen3_5TextConfig(**families.SMALL, head_dim=16, linear_num_value_heads=4,
                                           linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16)
    config.architectures = ["Qwen3_5ForCausalLM"]
    config.save_pretrained(project / "model")


def test_capabilities_come_from_the_mapping_and_gpu_archs_narrow_them(tmp_path: Path) -> None:
    from kernlock._internal.project.scan import ModelRef
    from kernlock._internal.resolve.models import model_kernels
    from kernlock._internal.spec.kernel_spec import Origin
    from kernlock._internal.spec.target import parse_target

    _qwen3_5(tmp_path)
    refs, targets = [ModelRef("./model", Origin("pyproject.toml"))], [parse_target(CUDA_130)]
    gdn = "Atlas-Inference/gdn@531ae679ab5c13a3bf49607e1b6e6459300772e9"  # the revision Transformers 5.25 pins
    keys = {caps: {s.key for s in model_kernels(refs, targets, tmp_path, (), dict(caps))[0]}
            for caps in ((), (("cuda", (90,)),), (("cuda", (121,)),))}
    assert gdn in keys[()] and gdn in keys[(("cuda", (121,)),)]  # 12.1 is a bound the mapping names
    assert keys[(("cuda", (90,)),)] == keys[()] - {gdn}  # an H100-only project never loads the GB10 path


def test_lock_with_gpu_archs_locks_only_what_those_gpus_load(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path, kernels=[FA2], targets=[CUDA_130],
                           extra='\nmodels = ["./model"]\ngpu-archs = ["H100"]')
    _qwen3_5(project)
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert {k.spec for k in load_lockfile(project / "kernels.lock").kernels} == {
        FA2, f"{KC}activation@v1", f"{KC}fla@v3", f"{KC}mamba-ssm@v5"}

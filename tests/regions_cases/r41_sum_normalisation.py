import torch


def uniform_scale(layer_ids: torch.Tensor, n_layers: int, e_scale: float = 1.0) -> torch.Tensor:
    scales = torch.ones(len(layer_ids), device=layer_ids.device)
    scales = scales * torch.where(layer_ids < n_layers - 1, e_scale, 1.0)
    return scales / torch.sum(scales)


def linear_scale(layer_ids: torch.Tensor, n_layers: int, e_scale: float = 1.0) -> torch.Tensor:
    scales = torch.Tensor(layer_ids + 1)
    scales = scales * torch.where(layer_ids < n_layers - 1, e_scale, 1.0)
    return scales / scales.sum(-1, keepdim=True)


def early_exit_loss(losses: torch.Tensor, layer_ids: torch.Tensor, n_layers: int,
                    scale_fn=uniform_scale) -> torch.Tensor:
    return torch.sum(scale_fn(layer_ids, n_layers) * losses)

"""KernelBench level 1, problem 97 (scaled dot-product attention), at a reduced shape."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)


batch_size = 1
num_heads = 4
sequence_length = 128
embedding_dimension = 64


def get_inputs():
    shape = (batch_size, num_heads, sequence_length, embedding_dimension)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []

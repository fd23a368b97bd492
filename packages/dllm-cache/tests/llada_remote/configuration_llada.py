"""A LLaDA-shaped config for the tests (field names of GSAI-ML/LLaDA-8B's ``LLaDAConfig``)."""

from transformers import PretrainedConfig


class LLaDAConfig(PretrainedConfig):
    model_type = "llada"

    def __init__(
        self,
        d_model=32,
        n_heads=4,
        n_kv_heads=None,
        n_layers=2,
        mlp_hidden_size=64,
        vocab_size=64,
        embedding_size=64,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        mask_token_id=3,
        **kwargs,
    ):
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.n_layers = n_layers
        self.mlp_hidden_size = mlp_hidden_size
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.rope_theta = rope_theta
        self.rms_norm_eps = rms_norm_eps
        self.mask_token_id = mask_token_id
        super().__init__(**kwargs)

    @property
    def effective_n_kv_heads(self):
        return self.n_kv_heads or self.n_heads

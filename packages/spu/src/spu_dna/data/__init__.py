"""Data: the three generated tasks of the reproduction, JASPAR PWMs, and local FASTA/CSV loaders."""

from spu_dna.data.files import janggu_task, read_csv, read_fasta
from spu_dna.data.jaspar import jaspar_pwm
from spu_dna.data.synthetic import (
    Task,
    bag_of_motifs_ceiling,
    long_range_task,
    motif_task,
    periodic_task,
    random_pwm,
)

__all__ = [
    "Task",
    "bag_of_motifs_ceiling",
    "janggu_task",
    "jaspar_pwm",
    "long_range_task",
    "motif_task",
    "periodic_task",
    "random_pwm",
    "read_csv",
    "read_fasta",
]

"""SGDR skills: executable, parameterised programs induced from successful trajectories."""

from guimem.memory.skills.library import SkillMemory, SkillSettings
from guimem.memory.skills.program import SkillProgram, SkillRun, execute

__all__ = ["SkillMemory", "SkillProgram", "SkillRun", "SkillSettings", "execute"]

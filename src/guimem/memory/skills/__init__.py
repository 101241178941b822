"""SGDR skills: executable, parameterised programs induced from successful trajectories."""

from guimem.memory.program import SkillProgram, SkillRun, execute
from guimem.memory.settings import SkillSettings
from guimem.memory.skills.library import SkillMemory

__all__ = ["SkillMemory", "SkillProgram", "SkillRun", "SkillSettings", "execute"]

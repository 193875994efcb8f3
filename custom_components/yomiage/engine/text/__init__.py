"""Text front end: normalisation, sentence splitting and OpenJTalk reading (SBV2 JP-Extra)."""

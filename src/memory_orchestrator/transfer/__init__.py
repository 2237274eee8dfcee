"""Memories in and out of a store: the export file (`records`), the formats an import reads
(`sources`) and what an import remembers of earlier runs (`ledger`). Pure reading and writing
of files: the service (`service.transfer`) runs them against a store."""

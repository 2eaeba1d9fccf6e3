"""What every source shares: the contract (`base.Source`), what the user named (`spec`) and the table of kinds that
read it (`registry`), units and an epoch's line (`units`), dealing them to readers (`deal`), the one read path and its
cursors (`order`, `position`), the row filter (`where`), fingerprints and bad records. The kinds live in the wings:
hub/, files/ and compose/. This package face imports nothing: naming a module of it loads only that module.
"""

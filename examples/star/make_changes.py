"""Write a day's change batches for the star example to a folder:

    product_inserted.parquet  50 new products (ids 2001-2050) and products 1-10 with a 10% higher price
    product_deleted.parquet   the keys of products 1-10: an update is a delete plus an insert of the key
    sales_inserted.parquet    100 late March sales (ids 200001-200100), half of them of the new products

    python examples/star/make_changes.py DATA_DIR OUT_DIR    (DATA_DIR: make_data.py's folder)
"""

import sys
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

if len(sys.argv) != 3:
    raise SystemExit(__doc__)
data, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(11)
products = pd.read_parquet(data / "product.parquet")

new = pd.DataFrame({"pr_id": np.arange(2001, 2051, dtype=np.int64)})
new["pr_category"] = rng.choice(sorted(products["pr_category"].unique()), len(new))
new["pr_price"] = (rng.integers(100, 50_000, len(new)) / 100).round(2)
repriced = products[products["pr_id"] <= 10].copy()  # same categories, new prices
repriced["pr_price"] = (repriced["pr_price"] * 1.1).round(2)
inserted = pd.concat([new, repriced], ignore_index=True)

n = 100
sales = pd.DataFrame({
    "sa_id": np.arange(200_001, 200_001 + n, dtype=np.int64),
    "sa_store": rng.integers(1, 41, n).astype(np.int64),
    "sa_product": np.where(np.arange(n) % 2 == 0, rng.integers(2001, 2051, n), rng.integers(11, 2001, n)),
    "sa_day": [date(2026, 3, 1) + timedelta(days=int(d)) for d in rng.integers(0, 31, n)],
    "sa_qty": rng.integers(1, 10, n).astype(np.int32),
})
price = pd.concat([products, inserted]).drop_duplicates("pr_id", keep="last").set_index("pr_id")["pr_price"]
sales["sa_amount"] = (sales["sa_qty"] * sales["sa_product"].map(price)).round(2)

for name, frame in (("product_inserted", inserted), ("product_deleted", repriced[["pr_id"]]),
                    ("sales_inserted", sales)):
    frame.to_parquet(out / f"{name}.parquet", index=False)
    print(f"wrote {out / (name + '.parquet')}: {len(frame)} rows")

"""Write store.parquet, product.parquet and sales.parquet (seeded, about 200,000 sales) to a folder.

    python examples/star/make_data.py OUT_DIR
"""

import sys
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

rng = np.random.default_rng(7)
out = Path(sys.argv[1] if len(sys.argv) > 1 else "star_data")
out.mkdir(parents=True, exist_ok=True)

regions = {"north": ["Oslo", "Bergen", "Trondheim"], "south": ["Kristiansand", "Arendal"],
           "west": ["Stavanger", "Haugesund", "Molde"]}
cities = [(city, region) for region, names in regions.items() for city in names]
stores = pd.DataFrame({"st_id": np.arange(1, 41, dtype=np.int64)})
picked = rng.integers(0, len(cities), len(stores))
stores["st_city"] = [cities[i][0] for i in picked]
stores["st_region"] = [cities[i][1] for i in picked]

categories = ["books", "garden", "kitchen", "toys", "sports", "music"]
products = pd.DataFrame({"pr_id": np.arange(1, 2001, dtype=np.int64)})
products["pr_category"] = rng.choice(categories, len(products))
products["pr_price"] = (rng.integers(100, 50_000, len(products)) / 100).round(2)

n = 200_000
first = date(2026, 1, 1)
sales = pd.DataFrame({
    "sa_id": np.arange(1, n + 1, dtype=np.int64),
    "sa_store": rng.integers(1, 41, n).astype(np.int64),
    "sa_product": rng.integers(1, 2001, n).astype(np.int64),
    "sa_day": [first + timedelta(days=int(d)) for d in rng.integers(0, 90, n)],
    "sa_qty": rng.integers(1, 10, n).astype(np.int32),
})
sales["sa_amount"] = (sales["sa_qty"] * products["pr_price"].to_numpy()[sales["sa_product"] - 1]).round(2)

for name, frame in (("store", stores), ("product", products), ("sales", sales)):
    frame.to_parquet(out / f"{name}.parquet", index=False)
    print(f"wrote {out / (name + '.parquet')}: {len(frame)} rows")
